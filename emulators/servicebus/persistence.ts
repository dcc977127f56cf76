import type { Namespace } from './namespace.js';

export async function attachPersistence(
  _ns: Namespace,
  _dir: string,
  _log: (line: string) => void,
): Promise<{ close(): Promise<void> }> {
  throw new Error('--data is not implemented yet');
}
