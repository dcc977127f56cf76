import type { Namespace } from './namespace.js';

export async function attachPersistence(
  _ns: Namespace,
  _dir: string,
  _log: (line: string) => void,
): Promise<{ close(): Promise<void> }> {
  throw new Error(
    "--data (persistence across restarts) is not implemented by this emulator yet; run without it (messages are kept in memory, as in Microsoft's emulator)",
  );
}
