//! A bounded in-process pipe: the artifact's bytes, as the source adapter stores them, reach a
//! digest running on another thread, so the artifact is digested while it is extracted.
//!
//! The writer never fails and never blocks the seal for long: when the reader has stopped
//! (its digest ended early), further bytes are dropped, and the digest's own result says so.

use std::io::{self, Read, Write};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};

/// Chunks in flight between the two ends.
const DEPTH: usize = 16;

/// A pipe's two ends.
pub(crate) fn pipe() -> (PipeWriter, PipeReader) {
    let (tx, rx) = sync_channel(DEPTH);
    (
        PipeWriter { tx: Some(tx) },
        PipeReader {
            rx,
            chunk: Vec::new(),
            pos: 0,
        },
    )
}

/// The sending end; dropping it ends the reader's stream.
pub(crate) struct PipeWriter {
    tx: Option<SyncSender<Vec<u8>>>,
}

impl Write for PipeWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if let Some(tx) = &self.tx
            && !buf.is_empty()
            && tx.send(buf.to_vec()).is_err()
        {
            self.tx = None;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The receiving end: a `Read` that ends when the writer is dropped.
pub(crate) struct PipeReader {
    rx: Receiver<Vec<u8>>,
    chunk: Vec<u8>,
    pos: usize,
}

impl Read for PipeReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.pos == self.chunk.len() {
            match self.rx.recv() {
                Ok(next) => {
                    self.chunk = next;
                    self.pos = 0;
                }
                Err(_) => return Ok(0),
            }
        }
        let n = buf.len().min(self.chunk.len() - self.pos);
        buf[..n].copy_from_slice(&self.chunk[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_arrive_in_order_and_a_stopped_reader_never_fails_the_writer() {
        let (mut w, mut r) = pipe();
        let reader = std::thread::spawn(move || {
            let mut all = Vec::new();
            r.read_to_end(&mut all).map(|_| all)
        });
        for i in 0..1000u32 {
            w.write_all(&i.to_be_bytes()).expect("write");
        }
        drop(w);
        let all = reader.join().expect("reader").expect("read");
        let want: Vec<u8> = (0..1000u32).flat_map(u32::to_be_bytes).collect();
        assert_eq!(all, want);

        let (mut w, r) = pipe();
        drop(r);
        for _ in 0..100 {
            assert_eq!(w.write(b"abc").expect("never fails"), 3);
        }
    }
}
