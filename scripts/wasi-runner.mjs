// Runs a wasm32-wasip1 test binary under Node's WASI: cargo calls it as
// CARGO_TARGET_WASM32_WASIP1_RUNNER="node scripts/wasi-runner.mjs" with the .wasm file and the
// test harness's arguments. The file system is seen as it is (preopened at /), so tests that read
// snapshot files by their absolute paths find them; the environment is passed through; the
// process exits with the harness's status.
import { readFile } from 'node:fs/promises';
import { WASI } from 'node:wasi';
import process from 'node:process';

const [wasmPath, ...args] = process.argv.slice(2);
if (!wasmPath) {
  console.error('usage: node scripts/wasi-runner.mjs FILE.wasm [ARGS...]');
  process.exit(2);
}
const wasi = new WASI({
  version: 'preview1',
  args: [wasmPath, ...args],
  env: process.env,
  preopens: { '/': '/' },
  returnOnExit: true,
});
const module = await WebAssembly.compile(await readFile(wasmPath));
const instance = await WebAssembly.instantiate(module, wasi.getImportObject());
process.exit(wasi.start(instance));
