// The ONNX exports of all-MiniLM-L6-v2 that onnxruntime-web runs (model.onnx and its offline
// optimized model_opt.onnx), built by scripts/prepare-onnx.sh into the model's folder when
// missing; shared by the suites that run ORT.
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';

/** Builds the ONNX models when needed; resolves to the reference venv's python. */
export async function prepareOnnx(ctx) {
  const { stdout, stderr } = await promisify(execFile)('bash', [path.join(ctx.root, 'scripts/prepare-onnx.sh')], { maxBuffer: 1 << 24 });
  for (const line of stderr.trim().split('\n')) ctx.log(line);
  return stdout.trim().split('\n').at(-1);
}
