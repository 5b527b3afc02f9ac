// Runs the queries of the JSON document on stdin ({"connection": {...},
// "queries": [{"text": ..., "values": [...]}]}) with node-postgres, each
// value as the text the server sent (no type parsing), and prints one
// JSON document: per query its columns (name, type OID) and rows, or its
// error (message, code).
const { Client } = require('pg');

const raw = { getTypeParser: () => (v) => v };

async function main() {
  let input = '';
  for await (const chunk of process.stdin) input += chunk;
  const job = JSON.parse(input);
  const client = new Client(job.connection);
  await client.connect();
  const out = [];
  for (const q of job.queries) {
    try {
      const res = await client.query({ text: q.text, values: q.values, rowMode: 'array', types: raw });
      out.push({ fields: res.fields.map((f) => [f.name, f.dataTypeID]), rows: res.rows });
    } catch (e) {
      out.push({ error: e.message, code: e.code });
    }
  }
  await client.end();
  process.stdout.write(JSON.stringify(out));
}

main().catch((e) => {
  process.stderr.write(String(e && e.stack || e) + '\n');
  process.exit(1);
});
