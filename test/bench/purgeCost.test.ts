import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { parsePriceTable } from '../../bench/pricing.js';
import { purgeCostPerMillion } from '../../bench/purgeCost.js';

const prices = parsePriceTable(
  JSON.parse(readFileSync(join(__dirname, '..', '..', '..', 'bench', 'prices.json'), 'utf8')) as unknown,
);

test('the purge is priced per million orders with its blob operations at the Hot tier, from bench/prices.json', () => {
  const cost = purgeCostPerMillion(
    { tableTransactions: 10, blobWrites: 1, blobReads: 0.1, blobLists: 0 },
    prices,
  );
  const b = prices.blobStorage!;
  assert.ok(b.hotWritePer10k.source.startsWith('https://azure.microsoft.com/'));
  assert.equal(cost.table, (10 * 1e6 * prices.tableStorage.per10kTransactions.value) / 1e4);
  assert.equal(cost.blob, (1e6 * b.hotWritePer10k.value + 0.1 * 1e6 * b.hotReadPer10k.value) / 1e4);
  assert.equal(cost.total, cost.table + cost.blob!);
});

test('without blob prices the purge says so instead of pricing blobs at zero', () => {
  const { blobStorage: _none, ...withoutBlobs } = prices;
  const cost = purgeCostPerMillion(
    { tableTransactions: 10, blobWrites: 1, blobReads: 0, blobLists: 0 },
    withoutBlobs,
  );
  assert.equal(cost.blob, null);
  assert.equal(cost.total, null);
});
