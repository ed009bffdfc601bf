//! Starts a real nginx (Debian nginx-light) on a free 127.0.0.1 port serving one directory,
//! from a config written to a fresh temp dir (pid, logs and temp paths inside it), as
//! pkg-tests/support/server.mjs does for the browser tests. `master_process off` keeps it one
//! process, so dropping the handle kills all of it.

use super::TempDir;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const NGINX: &str = "/usr/sbin/nginx";

/// A running nginx; stopped on drop.
pub struct Nginx {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    _dir: TempDir,
}

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    listener.local_addr().expect("local address").port()
}

fn config(dir: &Path, root: &Path, port: u16) -> String {
    let d = dir.display();
    format!(
        "daemon off;\nmaster_process off;\nworker_processes 1;\npid \"{d}/nginx.pid\";\n\
         error_log \"{d}/error.log\" warn;\nevents {{ worker_connections 256; }}\n\
         http {{\n  default_type application/octet-stream;\n  access_log \"{d}/access.log\";\n\
         client_body_temp_path \"{d}/tmp/body\";\n  proxy_temp_path \"{d}/tmp/proxy\";\n\
         fastcgi_temp_path \"{d}/tmp/fastcgi\";\n  uwsgi_temp_path \"{d}/tmp/uwsgi\";\n\
         scgi_temp_path \"{d}/tmp/scgi\";\n  sendfile on;\n\
         server {{\n    listen 127.0.0.1:{port};\n    root \"{}\";\n\
         location = /__ready {{ return 204; }}\n  }}\n}}\n",
        root.display()
    )
}

fn answers(port: u16) -> bool {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(1)));
    let request = "GET /__ready HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    if stream.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut reply = String::new();
    let _ = stream.read_to_string(&mut reply);
    reply.starts_with("HTTP/1.1 204")
}

impl Nginx {
    /// Serves `root` (absolute). Panics with nginx's error log if it does not come up.
    pub fn start(root: &Path) -> Self {
        assert!(
            Path::new(NGINX).exists(),
            "{NGINX} is missing: install nginx-light (npm run setup does)"
        );
        let mut last_log = String::new();
        for _ in 0..3 {
            let dir = TempDir::new("nginx");
            std::fs::create_dir_all(dir.path().join("tmp")).expect("temp dir");
            let port = free_port();
            let conf = dir.path().join("nginx.conf");
            std::fs::write(&conf, config(dir.path(), root, port)).expect("write nginx.conf");
            let error_log = dir.path().join("error.log");
            let mut child = Command::new(NGINX)
                .arg("-e")
                .arg(&error_log)
                .arg("-p")
                .arg(dir.path())
                .arg("-c")
                .arg(&conf)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn nginx");
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if answers(port) {
                    return Self {
                        child,
                        url: format!("http://127.0.0.1:{port}"),
                        _dir: dir,
                    };
                }
                if let Ok(Some(_)) = child.try_wait() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
            last_log = std::fs::read_to_string(&error_log).unwrap_or_default();
        }
        panic!("nginx did not start:\n{last_log}");
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
