// The CPU backend on every core where the page allows it: on a cross-origin isolated page
// (the dev server sends COOP/COEP) the package's worker pool is started and handed to the
// runtime, so CPU programs loaded afterwards split their products across the threads.
// Resolves to {threads, reason} as the CPU backend reports them.
import { CpuThreadPool, cpuThreadsUnavailable } from 'webdelegate/cpu-threads/pool.js';

export async function startCpuThreads(wd) {
  const unavailable = cpuThreadsUnavailable();
  if (!unavailable) {
    try {
      wd.useCpuThreads(await CpuThreadPool.start());
    } catch (e) {
      console.warn(`CPU threads: ${e.message}`);
    }
  }
  const [threads, reason] = wd.getOption('cpu', [{ key: 'threads', value: 0 }, { key: 'threads_reason', value: '' }]).map((o) => o.value);
  document.body.dataset.cpuThreads = String(threads);
  console.info(`CPU backend: ${threads} thread(s): ${unavailable ?? reason}`);
  return { threads: Number(threads), reason: unavailable ?? reason };
}
