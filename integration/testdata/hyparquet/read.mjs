// Reads each Parquet file named on the command line with hyparquet, which
// takes a file's size from stat (asyncBufferFromFile) and reads the footer
// at that offset, and prints one JSON line per file: its path and its rows
// (BigInt values as decimal strings), or the error.
import { asyncBufferFromFile, parquetReadObjects } from 'hyparquet'
import { compressors } from 'hyparquet-compressors'

const big = (_, v) => (typeof v === 'bigint' ? v.toString() : v)
for (const path of process.argv.slice(2)) {
  try {
    const file = await asyncBufferFromFile(path)
    const rows = await parquetReadObjects({ file, compressors })
    console.log(JSON.stringify({ path, rows }, big))
  } catch (e) {
    console.log(JSON.stringify({ path, error: String(e) }))
  }
}
