/**
 * Checks connection settings at start-up, so a malformed one fails naming its setting instead of
 * surfacing later as a 500 or an SDK's TypeError. Each check returns what is wrong, or undefined.
 * Only the shape is checked: whether the credentials work is for the first call to find out.
 */

/** `Key=Value;...` pairs (keys case-insensitive, as the SDKs read them); a string when malformed. */
export function connectionStringParts(value: string): Map<string, string> | string {
  const parts = new Map<string, string>();
  for (const segment of value.split(';')) {
    if (segment.trim() === '') continue;
    const eq = segment.indexOf('=');
    if (eq <= 0) return 'is not a connection string (key=value pairs separated by ";")';
    parts.set(segment.slice(0, eq).trim().toLowerCase(), segment.slice(eq + 1).trim());
  }
  return parts.size > 0 ? parts : 'is not a connection string (key=value pairs separated by ";")';
}

function isUrl(value: string, protocols: RegExp): boolean {
  try {
    const url = new URL(value);
    return protocols.test(url.protocol) && url.hostname !== '';
  } catch {
    return false;
  }
}

const httpProtocol = /^https?:$/;

/**
 * A storage connection string the table SDK can use: `UseDevelopmentStorage=true`; or an account
 * name and key (with DefaultEndpointsProtocol or a TableEndpoint); or a TableEndpoint with a
 * SharedAccessSignature.
 */
export function storageConnectionProblem(value: string): string | undefined {
  const parts = connectionStringParts(value);
  if (typeof parts === 'string') return parts;
  if (/^true$/i.test(parts.get('usedevelopmentstorage') ?? '')) return undefined;
  const endpoint = parts.get('tableendpoint');
  if (endpoint !== undefined && !isUrl(endpoint, httpProtocol))
    return `has a TableEndpoint that is not an http(s) URL: ${endpoint.slice(0, 100)}`;
  if (parts.get('sharedaccesssignature')) {
    return endpoint ? undefined : 'has a SharedAccessSignature but no TableEndpoint';
  }
  const name = parts.get('accountname');
  const key = parts.get('accountkey');
  if (!name || !key)
    return 'needs AccountName and AccountKey (or TableEndpoint and SharedAccessSignature, or UseDevelopmentStorage=true)';
  const protocol = parts.get('defaultendpointsprotocol');
  if (protocol !== undefined && !/^https?$/i.test(protocol))
    return `has DefaultEndpointsProtocol ${protocol.slice(0, 20)}, not http or https`;
  if (!endpoint && protocol === undefined) return 'needs DefaultEndpointsProtocol or a TableEndpoint';
  return undefined;
}

/**
 * A Service Bus connection string the SDK can use: an `sb://` Endpoint with a host, and a shared
 * access key (name and key) or a SharedAccessSignature. The emulator's carries the same parts.
 */
export function serviceBusConnectionProblem(value: string): string | undefined {
  const parts = connectionStringParts(value);
  if (typeof parts === 'string') return parts;
  const endpoint = parts.get('endpoint');
  if (!endpoint) return 'has no Endpoint (sb://<namespace>.servicebus.windows.net/)';
  if (!isUrl(endpoint, /^sb:$/))
    return `has an Endpoint that is not an sb:// URL with a host: ${endpoint.slice(0, 100)}`;
  if (parts.get('sharedaccesssignature')) return undefined;
  if (!parts.get('sharedaccesskeyname')) return 'has no SharedAccessKeyName (or SharedAccessSignature)';
  if (!parts.get('sharedaccesskey')) return 'has no SharedAccessKey';
  return undefined;
}

/** `<namespace>.servicebus.windows.net`: a host name, as identity-based connections take it. */
export function namespaceProblem(value: string): string | undefined {
  return /^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)+(:\d{1,5})?$/i.test(value)
    ? undefined
    : `is not a host name (such as <namespace>.servicebus.windows.net, without sb:// or a path): ${value.slice(0, 100)}`;
}
