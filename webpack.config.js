// Builds the demo page in www/ into www/dist/ (npm run build:www) and serves it on
// http://127.0.0.1:8080/ (npm start). `import ... from 'webdelegate'` resolves to the package
// wasm-pack built into pkg/; webpack emits its .wasm (referenced through
// `new URL('webdelegate_bg.wasm', import.meta.url)`) as an asset next to the bundle. The dev
// server also serves .cache/models/ at /.cache/models/ for the demo's model, and sends COOP/COEP
// so the page is cross-origin isolated (the CPU backend's threads).
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import CopyPlugin from 'copy-webpack-plugin';

const ROOT = path.dirname(fileURLToPath(import.meta.url));
const PKG_ENTRY = path.join(ROOT, 'pkg', 'webdelegate.js');
const PKG_THREADS = path.join(ROOT, 'pkg', 'cpu-threads');
const HOST = '127.0.0.1';
const PORT = 8080;
const MODELS_DIR = path.join(ROOT, '.cache', 'models');

export default () => {
  if (!existsSync(PKG_ENTRY)) {
    throw new Error(`${PKG_ENTRY} is missing: run \`npm run build:pkg\` first`);
  }
  return {
    context: path.join(ROOT, 'www'),
    entry: { main: './main.js', generate: './generate.js' },
    output: {
      path: path.join(ROOT, 'www', 'dist'),
      filename: '[name].js',
      assetModuleFilename: '[name].[contenthash:8][ext]',
      clean: true,
    },
    resolve: {
      alias: { webdelegate$: PKG_ENTRY, 'webdelegate/cpu-threads': PKG_THREADS },
    },
    plugins: [new CopyPlugin({ patterns: ['index.html', 'generate.html', 'style.css'] })],
    performance: { hints: false }, // the wasm module is expected to be large
    devtool: 'source-map',
    devServer: {
      host: HOST,
      port: PORT,
      // The demo's default model URL is /.cache/models/all-MiniLM-L6-v2/ (the repo root is the web
      // root under nginx in the tests); serve the same path here.
      static: [{ directory: MODELS_DIR, publicPath: '/.cache/models', watch: false }],
      // Cross-origin isolated, so the CPU backend's worker pool has shared memory (www/threads.js).
      headers: { 'Cross-Origin-Opener-Policy': 'same-origin', 'Cross-Origin-Embedder-Policy': 'require-corp' },
      hot: false,
      client: { overlay: true },
      onListening: () => console.log(`\nwebdelegate demo: http://${HOST}:${PORT}/\n`),
    },
  };
};
