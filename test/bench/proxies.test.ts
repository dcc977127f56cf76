import { createRequire } from 'node:module';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  accountInPath,
  batchOperationCount,
  batchTarget,
  classifyTableRequest,
  partitionInBody,
  partitionInFilter,
  partitionInPath,
  queryEntitiesByPartition,
} from '../../bench/tableProxy.js';
import { partitionSummary, readPartition, writtenPartition } from '../../bench/partitionLoad.js';
import { AmqpFrameCounter } from '../../bench/amqpProxy.js';
import type { Counts } from '../../bench/stats.js';

test('table requests are classified as Azure bills them', () => {
  const base = '/devstoreaccount1';
  assert.deepEqual(classifyTableRequest('POST', `${base}/$batch`), { kind: 'batch', table: '' });
  assert.deepEqual(classifyTableRequest('POST', `${base}/Tables`), { kind: 'admin', table: '' });
  assert.deepEqual(classifyTableRequest('DELETE', `${base}/Tables('Orders')`), { kind: 'admin', table: '' });
  assert.deepEqual(
    classifyTableRequest('GET', `${base}/Orders(PartitionKey='a',RowKey='state')?$select=ProcessState`),
    { kind: 'read', table: 'Orders' },
  );
  assert.deepEqual(classifyTableRequest('GET', `${base}/Orders()?$filter=PartitionKey%20eq%20'a'`), {
    kind: 'query',
    table: 'Orders',
  });
  assert.deepEqual(classifyTableRequest('GET', `${base}/InFlight?$filter=x`), {
    kind: 'query',
    table: 'InFlight',
  });
  assert.deepEqual(classifyTableRequest('PUT', `${base}/InFlight(PartitionKey='ab',RowKey='abc')`), {
    kind: 'write',
    table: 'InFlight',
  });
  assert.deepEqual(classifyTableRequest('DELETE', `${base}/InFlight(PartitionKey='ab',RowKey='abc')`), {
    kind: 'write',
    table: 'InFlight',
  });
  assert.deepEqual(classifyTableRequest('POST', `${base}/Orders`), { kind: 'write', table: 'Orders' });
});

test('the account of a path-style request is its first path segment', () => {
  assert.equal(
    accountInPath("/devstoreaccount1/Orders(PartitionKey='a',RowKey='state')"),
    'devstoreaccount1',
  );
  assert.equal(accountInPath('/orders2/$batch'), 'orders2');
  assert.equal(accountInPath("/orders3/OrderIndex()?$filter=PartitionKey%20eq%20'x/y'"), 'orders3');
  assert.equal(accountInPath('/'), '');
});

test('batchOperationCount counts the sub-requests of a changeset', () => {
  const body = [
    '--batch_1',
    'Content-Type: multipart/mixed; boundary=changeset_1',
    '',
    '--changeset_1',
    'Content-Type: application/http',
    '',
    "PUT http://127.0.0.1:1/devstoreaccount1/Orders(PartitionKey='a',RowKey='state') HTTP/1.1",
    '',
    '--changeset_1',
    'Content-Type: application/http',
    '',
    'POST http://127.0.0.1:1/devstoreaccount1/Orders HTTP/1.1',
    'x: PUT http://not-a-request-line',
    '--changeset_1--',
  ].join('\r\n');
  assert.equal(batchOperationCount(body), 2);
  assert.equal(batchOperationCount(''), 0);
});

function frame(code: number | null, type = 0): Buffer {
  const body = code === null ? Buffer.alloc(0) : Buffer.from([0x00, 0x53, code, 0x45]);
  const header = Buffer.alloc(8);
  header.writeUInt32BE(8 + body.length, 0);
  header[4] = 2;
  header[5] = type;
  return Buffer.concat([header, body]);
}

test('AMQP frames are counted by performative across arbitrary chunk boundaries', () => {
  const counts: Counts = {};
  const counter = new AmqpFrameCounter(counts, 'out.');
  const stream = Buffer.concat([
    Buffer.from('AMQP\x03\x01\x00\x00', 'latin1'),
    frame(0x41, 1),
    Buffer.from('AMQP\x00\x01\x00\x00', 'latin1'),
    frame(0x10),
    frame(0x13),
    frame(null),
    frame(0x14),
    frame(0x15),
    frame(0x13),
  ]);
  for (let i = 0; i < stream.length; i += 3) counter.push(stream.subarray(i, i + 3));
  assert.deepEqual(counts, {
    'out.header': 2,
    'out.sasl-init': 1,
    'out.open': 1,
    'out.flow': 2,
    'out.empty': 1,
    'out.transfer': 1,
    'out.transferBytes': 12,
    'out.disposition': 1,
  });
});

test('a stream that is not AMQP is reported, not guessed at', () => {
  const counts: Counts = {};
  const counter = new AmqpFrameCounter(counts, 'in.');
  counter.push(Buffer.from([0, 0, 0, 1, 0, 0, 0, 0, 9, 9]));
  assert.deepEqual(counts, { 'in.unparsed': 1 });
});

test('partitions are read from entity paths, query filters and insert bodies', () => {
  const base = '/devstoreaccount1';
  assert.equal(
    partitionInPath(`${base}/OrderIndex(PartitionKey='state%3APending',RowKey='n%3A01')`),
    'state:Pending',
  );
  assert.equal(partitionInPath(`${base}/Orders(PartitionKey='it''s',RowKey='x')?$select=a`), "it's");
  assert.equal(partitionInPath(`${base}/Orders()`), undefined);
  assert.equal(
    partitionInFilter(
      `${base}/OrderIndex()?$filter=${encodeURIComponent("PartitionKey eq 'state:Pending' and RowKey ge 'n:'")}`,
    ),
    'state:Pending',
  );
  assert.equal(
    partitionInFilter(
      `${base}/InFlight()?$filter=${encodeURIComponent("CheckAfter le datetime'2026-01-01T00:00:00Z'")}`,
    ),
    undefined,
  );
  assert.equal(partitionInBody('{"PartitionKey":"ab","RowKey":"abc"}'), 'ab');
  assert.equal(partitionInBody('not json'), undefined);
});

test('a batch is one partition, and each of its sub-requests one entity written', () => {
  const body = [
    '--batch_1',
    'Content-Type: multipart/mixed; boundary=changeset_1',
    '',
    '--changeset_1',
    'Content-Type: application/http',
    '',
    'POST http://127.0.0.1:1/devstoreaccount1/OrderIndex HTTP/1.1',
    'Content-Type: application/json',
    '',
    '{"PartitionKey":"state:Pending","RowKey":"t:1:o"}',
    '--changeset_1',
    'Content-Type: application/http',
    '',
    "MERGE http://127.0.0.1:1/devstoreaccount1/OrderIndex(PartitionKey='state%3APending',RowKey='n%3A03') HTTP/1.1",
    '',
    '{"PartitionKey":"state:Pending","RowKey":"n:03","Count":1}',
    '--changeset_1',
    'Content-Type: application/http',
    '',
    "DELETE http://127.0.0.1:1/devstoreaccount1/OrderIndex(PartitionKey='state%3APending',RowKey='a%3A1%3Ao') HTTP/1.1",
    '--changeset_1--',
  ].join('\r\n');
  assert.deepEqual(batchTarget(body), { table: 'OrderIndex', partition: 'state:Pending', entities: 3 });
  assert.equal(batchTarget('--batch_1--'), undefined);
});

test('a query payload counts its entities per partition', () => {
  const payload = JSON.stringify({
    value: [
      { PartitionKey: 'a', RowKey: '1' },
      { PartitionKey: 'a', RowKey: '2' },
      { PartitionKey: 'b', RowKey: '1' },
      { RowKey: 'x' },
    ],
  });
  assert.deepEqual(queryEntitiesByPartition(payload), {
    total: 4,
    byPartition: { a: 2, b: 1, '(unnamed)': 1 },
  });
  assert.deepEqual(queryEntitiesByPartition('oops'), { total: 0, byPartition: {} });
});

test("transfer bytes are counted per entity, from each side's attach", () => {
  const req = createRequire(__filename);
  const frames = req('rhea/lib/frames.js') as {
    attach(f: object): { described(): unknown };
    transfer(f: object): { described(): unknown };
    amqp_frame(channel: number, performative: unknown, payload?: Buffer): unknown;
    write_frame(frame: unknown): Buffer;
  };
  const terminus = req('rhea/lib/terminus.js') as {
    source(f: object): { described(): unknown };
    target(f: object): { described(): unknown };
  };
  const attach = (
    channel: number,
    handle: number,
    role: boolean,
    source: string,
    target: string,
    name: string,
  ) =>
    frames.write_frame(
      frames.amqp_frame(
        channel,
        frames
          .attach({
            name,
            handle,
            role,
            source: terminus.source({ address: source }).described(),
            target: terminus.target({ address: target }).described(),
          })
          .described(),
      ),
    );
  const transfer = (channel: number, handle: number, bytes: number) =>
    frames.write_frame(
      frames.amqp_frame(
        channel,
        frames.transfer({ handle, delivery_id: 0 }).described(),
        Buffer.alloc(bytes),
      ),
    );
  const counts: Counts = {};
  const names = new Map<string, string>();
  const out = new AmqpFrameCounter(counts, 'out.', 'client', names);
  const inbound = new AmqpFrameCounter(counts, 'in.', 'broker', names);
  // The client sends to the scheduler queue on handle 0 and receives from agent-payment on handle 1.
  out.push(attach(0, 0, false, 'sender-1', 'scheduler', 'send-link'));
  out.push(attach(0, 1, true, 'agent-payment', 'receiver-1', 'recv-link'));
  // The broker answers with its own handles and the roles swapped; the link name says which link
  // it is even when its termini carry no address (as the emulator's do).
  inbound.push(attach(0, 7, true, 'sender-1', 'scheduler', 'send-link'));
  inbound.push(attach(0, 8, false, '', '', 'recv-link'));
  const sent = transfer(0, 0, 100);
  const delivered = transfer(0, 8, 40);
  out.push(sent);
  inbound.push(delivered);
  inbound.push(transfer(0, 9, 10)); // a handle no attach named: counted in total only
  assert.equal(counts['out.bytes.scheduler'], sent.length);
  assert.equal(counts['in.bytes.agent-payment'], delivered.length);
  assert.equal(counts['out.bytes.agent-payment'], undefined);
  assert.equal(counts['in.transferBytes'], delivered.length + transfer(0, 9, 10).length);
});

test('the table proxy attributes entities to the partition they load', () => {
  const base = 'http://127.0.0.1:1/devstoreaccount1';
  const batch = [
    '--batch_1',
    'Content-Type: multipart/mixed; boundary=changeset_1',
    '',
    '--changeset_1',
    `POST ${base}/OrderIndex HTTP/1.1`,
    'Content-Type: application/json',
    '',
    '{"PartitionKey":"state:Pending:7","RowKey":"a:1:x"}',
    '--changeset_1',
    `PUT ${base}/OrderIndex(PartitionKey='state%3APending%3A7',RowKey='n%3A01') HTTP/1.1`,
    '',
    '{"Count":1}',
    '--changeset_1--',
  ].join('\r\n');
  assert.deepEqual(writtenPartition('POST', '/devstoreaccount1/$batch', batch), {
    table: 'OrderIndex',
    partitionKey: 'state:Pending:7',
    entities: 2,
  });
  assert.deepEqual(
    writtenPartition('DELETE', "/devstoreaccount1/InFlight(PartitionKey='ab',RowKey='x')", ''),
    { table: 'InFlight', partitionKey: 'ab', entities: 1 },
  );
  assert.deepEqual(
    writtenPartition('POST', '/devstoreaccount1/Orders', '{"PartitionKey":"o\'1","RowKey":"r"}'),
    {
      table: 'Orders',
      partitionKey: "o'1",
      entities: 1,
    },
  );
  assert.deepEqual(
    readPartition(
      `/devstoreaccount1/OrderIndex()?$filter=${encodeURIComponent("PartitionKey eq 'state:Pending:3' and RowKey ge 'n:'")}`,
    ),
    { table: 'OrderIndex', partitionKey: 'state:Pending:3' },
  );
  assert.equal(
    readPartition(`/devstoreaccount1/InFlight()?$filter=${encodeURIComponent('CheckAfter le x')}`),
    undefined,
  );
  const summary = partitionSummary(
    {
      'table.partition.OrderIndex|state:Pending:1.written': 10,
      'table.partition.OrderIndex|state:Pending:2.written': 10,
      'table.partition.OrderIndex|state:Pending:2.read': 1,
      'table.partition.Orders|0a1b2c3d-0000-4000-8000-000000000000.written': 8,
    },
    2,
  );
  assert.deepEqual(summary[0], {
    group: 'OrderIndex|state:Pending:{p}',
    partitions: 2,
    writtenPerOrder: 10,
    readPerOrder: 0.5,
    maxWrittenPerPartitionPerOrder: 5,
  });
  assert.equal(summary[1].group, 'Orders|{order}');
});
