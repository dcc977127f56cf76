import type * as Cockatiel from 'cockatiel' with { 'resolution-mode': 'import' };

/**
 * cockatiel 4 ships as an ES module only, and this package compiles to CommonJS with
 * `module: Node16`, where TypeScript refuses a static import of an ES module. A dynamic import
 * is the supported bridge; the module is loaded once and shared.
 */
export type CockatielModule = typeof Cockatiel;
export type { Cockatiel };

let loading: Promise<CockatielModule> | undefined;

export function loadCockatiel(): Promise<CockatielModule> {
  loading ??= import('cockatiel');
  return loading;
}
