//! An incremental reader of PostgreSQL's binary `COPY` format: the 11-byte signature, flags and
//! header extension, then tuples of `i16` field count and `i32`-length-prefixed fields (`-1` is
//! NULL), ended by a `-1` trailer. Chunks arrive as the server sends them; a tuple may span
//! chunks, and only whole tuples are handed on.

use crate::error::SourceError;

const SIGNATURE: &[u8; 11] = b"PGCOPY\n\xff\r\n\0";

/// Largest single field accepted, in bytes (the `RowBinary` decoder's per-value bound).
pub const MAX_FIELD_BYTES: usize = dpone_engine_clickhouse::canonical::rowbinary::MAX_VALUE_BYTES;

/// The reader's state.
pub struct CopyReader {
    buf: Vec<u8>,
    pos: usize,
    header_done: bool,
    trailer_seen: bool,
    fields: usize,
}

fn format(what: &'static str) -> SourceError {
    SourceError::CopyFormat(what)
}

impl CopyReader {
    /// A reader of tuples with `fields` fields each.
    pub fn new(fields: usize) -> Self {
        Self {
            buf: Vec::new(),
            pos: 0,
            header_done: false,
            trailer_seen: false,
            fields,
        }
    }

    /// Appends a chunk and calls `tuple` with the fields of every complete tuple.
    pub fn push<F>(&mut self, chunk: &[u8], mut tuple: F) -> Result<(), SourceError>
    where
        F: FnMut(&[Option<&[u8]>]) -> Result<(), SourceError>,
    {
        if self.trailer_seen && !chunk.is_empty() {
            return Err(format("data after the trailer"));
        }
        if self.pos > 0 && self.pos == self.buf.len() {
            self.buf.clear();
            self.pos = 0;
        } else if self.pos > (1 << 20) {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
        self.buf.extend_from_slice(chunk);
        if !self.header_done {
            if self.buf.len() < SIGNATURE.len() + 8 {
                return Ok(());
            }
            if &self.buf[..SIGNATURE.len()] != SIGNATURE {
                return Err(format("bad signature"));
            }
            let ext = u32::from_be_bytes(
                self.buf[15..19]
                    .try_into()
                    .map_err(|_| format("short header"))?,
            ) as usize;
            let end = 19usize
                .checked_add(ext)
                .ok_or(format("header extension too long"))?;
            if self.buf.len() < end {
                return Ok(());
            }
            self.pos = end;
            self.header_done = true;
        }
        let mut spans: Vec<Option<(usize, usize)>> = Vec::with_capacity(self.fields);
        loop {
            let mut p = self.pos;
            let Some(count) = read_i16(&self.buf, &mut p) else {
                return Ok(());
            };
            if count == -1 {
                self.trailer_seen = true;
                self.pos = p;
                if self.pos != self.buf.len() {
                    return Err(format("data after the trailer"));
                }
                return Ok(());
            }
            if count < 0 || count as usize != self.fields {
                return Err(format("unexpected field count"));
            }
            spans.clear();
            let mut complete = true;
            for _ in 0..self.fields {
                let Some(len) = read_i32(&self.buf, &mut p) else {
                    complete = false;
                    break;
                };
                if len == -1 {
                    spans.push(None);
                    continue;
                }
                let len = usize::try_from(len).map_err(|_| format("negative field length"))?;
                if len > MAX_FIELD_BYTES {
                    return Err(format("field larger than the per-value bound"));
                }
                if self.buf.len() - p < len {
                    complete = false;
                    break;
                }
                spans.push(Some((p, p + len)));
                p += len;
            }
            if !complete {
                return Ok(());
            }
            let fields: Vec<Option<&[u8]>> = spans
                .iter()
                .map(|s| s.map(|(a, b)| &self.buf[a..b]))
                .collect();
            tuple(&fields)?;
            self.pos = p;
        }
    }

    /// The stream ended: it must have ended exactly after the trailer.
    pub fn finish(&self) -> Result<(), SourceError> {
        if self.trailer_seen {
            Ok(())
        } else {
            Err(format("the stream ended before the trailer"))
        }
    }
}

fn read_i16(buf: &[u8], p: &mut usize) -> Option<i16> {
    let b = buf.get(*p..*p + 2)?;
    *p += 2;
    Some(i16::from_be_bytes([b[0], b[1]]))
}

fn read_i32(buf: &[u8], p: &mut usize) -> Option<i32> {
    let b = buf.get(*p..*p + 4)?;
    *p += 4;
    Some(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream(rows: &[Vec<Option<Vec<u8>>>]) -> Vec<u8> {
        let mut v = SIGNATURE.to_vec();
        v.extend_from_slice(&0u32.to_be_bytes());
        v.extend_from_slice(&0u32.to_be_bytes());
        for r in rows {
            v.extend_from_slice(&(r.len() as i16).to_be_bytes());
            for f in r {
                match f {
                    None => v.extend_from_slice(&(-1i32).to_be_bytes()),
                    Some(b) => {
                        v.extend_from_slice(&(b.len() as i32).to_be_bytes());
                        v.extend_from_slice(b);
                    }
                }
            }
        }
        v.extend_from_slice(&(-1i16).to_be_bytes());
        v
    }

    fn collect(
        bytes: &[u8],
        chunk: usize,
        fields: usize,
    ) -> Result<Vec<Vec<Option<Vec<u8>>>>, SourceError> {
        let mut r = CopyReader::new(fields);
        let mut out = Vec::new();
        for c in bytes.chunks(chunk.max(1)) {
            r.push(c, |t| {
                out.push(t.iter().map(|f| f.map(<[u8]>::to_vec)).collect());
                Ok(())
            })?;
        }
        r.finish()?;
        Ok(out)
    }

    #[test]
    fn tuples_survive_any_chunking() {
        let rows = vec![
            vec![Some(b"abc".to_vec()), None],
            vec![Some(Vec::new()), Some(vec![1, 2, 3, 4, 5, 6, 7, 8])],
            vec![None, None],
        ];
        let bytes = stream(&rows);
        for chunk in [1, 2, 3, 7, 19, 1000] {
            assert_eq!(
                collect(&bytes, chunk, 2).expect("decodes"),
                rows,
                "chunk {chunk}"
            );
        }
        assert_eq!(
            collect(&stream(&[]), 5, 2).expect("empty"),
            Vec::<Vec<_>>::new()
        );
    }

    #[test]
    fn malformed_streams_are_refused() {
        let good = stream(&[vec![Some(b"x".to_vec())]]);
        let code = |bytes: &[u8], fields| collect(bytes, 4, fields).expect_err("refused").code();
        assert_eq!(
            code(&good[..good.len() - 2], 1),
            "DPONE_PG_ROWBINARY_COPY_FORMAT"
        );
        assert_eq!(code(&good, 2), "DPONE_PG_ROWBINARY_COPY_FORMAT");
        let mut bad = good.clone();
        bad[0] = b'X';
        assert_eq!(code(&bad, 1), "DPONE_PG_ROWBINARY_COPY_FORMAT");
        let mut extra = good;
        extra.push(0);
        assert_eq!(code(&extra, 1), "DPONE_PG_ROWBINARY_COPY_FORMAT");
    }
}
