import assert from 'node:assert/strict';
import { basename } from 'node:path';
import { describe, it } from 'node:test';
import { resolveEntryFiles } from '../../local/host/appLoader.js';
import { writeFixtureApp } from './fixtureApp.js';

const names = (files: string[]) => files.map((f) => basename(f));

describe('local host: package.json main, as the Node worker globs it', () => {
  it('expands braces, as the worker glob library does (dist/src/{index.js,functions/*.js})', () => {
    const root = writeFixtureApp({ files: '{httpFunctions.js,timerFunctions.js}' });
    assert.deepEqual(names(resolveEntryFiles(root)), ['httpFunctions.js', 'timerFunctions.js']);
  });

  it('expands braces inside a name and combines them with wildcards', () => {
    const root = writeFixtureApp({ files: '{http,timer}Functions.js' });
    assert.deepEqual(names(resolveEntryFiles(root)), ['httpFunctions.js', 'timerFunctions.js']);
    const mixed = writeFixtureApp({ files: '{observations,serviceBus*}.js' });
    assert.deepEqual(names(resolveEntryFiles(mixed)), ['observations.js', 'serviceBusFunctions.js']);
  });

  it('keeps plain paths, wildcards and ** working, sorted, without maps or typings', () => {
    const star = writeFixtureApp({ files: '*Functions.js' });
    assert.deepEqual(names(resolveEntryFiles(star)), [
      'httpFunctions.js',
      'serviceBusFunctions.js',
      'timerFunctions.js',
    ]);
    const plain = writeFixtureApp({ files: 'httpFunctions.js' });
    assert.deepEqual(names(resolveEntryFiles(plain)), ['httpFunctions.js']);
    const deep = writeFixtureApp({ files: '**/timer*.js' });
    assert.deepEqual(names(resolveEntryFiles(deep)), ['timerFunctions.js']);
  });

  it('fails naming the pattern when nothing matches', () => {
    const root = writeFixtureApp({ files: '{nothing,nowhere}.js' });
    assert.throws(() => resolveEntryFiles(root), /\{nothing,nowhere\}\.js\) matches no file/);
  });
});
