//! Runs pkg-tests/support/faulty-server.mjs (node) for the faults nginx cannot produce, and reads
//! its request log and in-flight count.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

/// A running fault server; stopped on drop.
pub struct FaultyServer {
    child: Child,
    _stdin: Option<ChildStdin>,
    pub url: String,
}

/// One logged request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Logged {
    pub url: String,
    pub range: Option<String>,
    pub if_range: Option<String>,
    pub status: u16,
}

fn get(url: &str) -> String {
    let mut response = ureq::get(url).call().expect("fault server answers");
    let mut text = String::new();
    response
        .body_mut()
        .as_reader()
        .read_to_string(&mut text)
        .expect("read body");
    text
}

impl FaultyServer {
    /// Serves files under `root` at `/f/<faults>/<file>`.
    pub fn start(root: &Path) -> Self {
        let script =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("pkg-tests/support/faulty-server.mjs");
        let mut child = Command::new("node")
            .arg(script)
            .arg("--root")
            .arg(root)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn node (needed for the fault-injecting server)");
        let stdout = child.stdout.take().expect("stdout");
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("port line");
        let port: u16 = line
            .trim()
            .trim_start_matches("{\"port\":")
            .trim_end_matches('}')
            .parse()
            .unwrap_or_else(|_| panic!("fault server said {line:?}"));
        let stdin = child.stdin.take();
        Self {
            child,
            _stdin: stdin,
            url: format!("http://127.0.0.1:{port}"),
        }
    }

    /// The URL of `file` with `faults` (e.g. `"drop=1000,times=1"`, or `"-"`).
    pub fn file_url(&self, faults: &str, file: &str) -> String {
        format!("{}/f/{faults}/{file}", self.url)
    }

    /// Every request so far, in arrival order.
    pub fn log(&self) -> Vec<Logged> {
        get(&format!("{}/__log", self.url))
            .lines()
            .filter(|l| !l.is_empty())
            .map(|line| {
                let mut parts = line.split('\t');
                let mut next = || parts.next().unwrap_or("-").to_owned();
                let opt = |s: String| (s != "-").then_some(s);
                let url = next();
                let range = opt(next());
                let if_range = opt(next());
                let status = next().parse().unwrap_or(0);
                Logged {
                    url,
                    range,
                    if_range,
                    status,
                }
            })
            .collect()
    }

    /// Responses still being sent.
    pub fn active(&self) -> u32 {
        get(&format!("{}/__active", self.url))
            .trim()
            .parse()
            .unwrap_or(u32::MAX)
    }

    /// Waits (up to `limit`) until no response is being sent; the count left.
    pub fn wait_idle(&self, limit: Duration) -> u32 {
        let deadline = Instant::now() + limit;
        loop {
            let active = self.active();
            if active == 0 || Instant::now() > deadline {
                return active;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for FaultyServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
