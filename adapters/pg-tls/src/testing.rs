//! Test support (feature `test-support`): a fake PostgreSQL server that refuses TLS and asks
//! for a cleartext password, recording every byte it receives, so a test can prove that a
//! connection never downgrades and never sends a password in clear.

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The SSLRequest code of the PostgreSQL protocol.
const SSL_REQUEST: u32 = 80_877_103;

/// A fake server on 127.0.0.1: answers `N` to every SSLRequest, then sends
/// AuthenticationCleartextPassword after the startup message, and records every byte each
/// connection sent (until it closes or is idle for two seconds).
pub struct PlaintextTrap {
    addr: SocketAddr,
    received: Arc<Mutex<Vec<u8>>>,
    sessions: Arc<Mutex<usize>>,
}

impl PlaintextTrap {
    /// Starts the server on an ephemeral loopback port (a thread per connection).
    pub fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the fake server");
        let addr = listener.local_addr().expect("local address");
        let received = Arc::new(Mutex::new(Vec::new()));
        let sessions = Arc::new(Mutex::new(0));
        let (r, n) = (received.clone(), sessions.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (r, n) = (r.clone(), n.clone());
                std::thread::spawn(move || session(stream, &r, &n));
            }
        });
        Self {
            addr,
            received,
            sessions,
        }
    }

    /// The server's port (host `127.0.0.1`).
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// A copy of every byte received so far, all connections together.
    pub fn received(&self) -> Vec<u8> {
        self.received.lock().map(|v| v.clone()).unwrap_or_default()
    }

    /// How many connections have ended (so the bytes of each are complete).
    pub fn finished(&self) -> usize {
        self.sessions.lock().map(|n| *n).unwrap_or(0)
    }

    /// Whether `needle` occurs in what was received.
    pub fn saw(&self, needle: &[u8]) -> bool {
        !needle.is_empty() && self.received().windows(needle.len()).any(|w| w == needle)
    }
}

fn session(mut s: TcpStream, received: &Mutex<Vec<u8>>, sessions: &Mutex<usize>) {
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let log = |b: &[u8]| {
        if let Ok(mut v) = received.lock() {
            v.extend_from_slice(b);
        }
    };
    let read_message = |s: &mut TcpStream| -> Option<Vec<u8>> {
        let mut len = [0u8; 4];
        s.read_exact(&mut len).ok()?;
        let n = u32::from_be_bytes(len) as usize;
        let mut body = vec![0u8; n.saturating_sub(4).min(1 << 16)];
        s.read_exact(&mut body).ok()?;
        log(&len);
        log(&body);
        Some(body)
    };
    // Startup: any number of SSLRequests, each answered `N`, then the startup message.
    while let Some(body) = read_message(&mut s) {
        if body.len() == 4
            && u32::from_be_bytes([body[0], body[1], body[2], body[3]]) == SSL_REQUEST
        {
            if s.write_all(b"N").is_err() {
                break;
            }
            continue;
        }
        // AuthenticationCleartextPassword.
        let _ = s.write_all(&[b'R', 0, 0, 0, 8, 0, 0, 0, 3]);
        let mut buf = [0u8; 4096];
        while let Ok(n) = s.read(&mut buf) {
            if n == 0 {
                break;
            }
            if let Ok(mut v) = received.lock() {
                v.extend_from_slice(&buf[..n]);
            }
        }
        break;
    }
    if let Ok(mut n) = sessions.lock() {
        *n += 1;
    }
}
