//! A streaming checker of PostgreSQL's binary `COPY` framing.
//!
//! Artifacts are stored exactly as the source sent them (`COPY ... TO STDOUT (FORMAT binary)`),
//! so the target can load them with `COPY ... FROM STDIN (FORMAT binary)` without re-encoding.
//! [`FrameChecker`] is fed the bytes in arbitrary chunks and proves, without holding rows in
//! memory, that the stream is complete (header, tuples, trailer, nothing after it), that every
//! tuple has the expected number of fields, and that no key field (the first `key_fields` of each
//! tuple) is null. It counts tuples. Field contents are skipped, never inspected or kept.

const SIGNATURE: &[u8; 11] = b"PGCOPY\n\xff\r\n\0";
const FIXED_HEADER: usize = 11 + 4 + 4;

/// Why a stream is not acceptable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameError {
    /// The signature, flags or a length is not valid binary COPY.
    Malformed,
    /// A tuple has a different number of fields than expected.
    FieldCount,
    /// A key field is null.
    NullKey,
    /// Bytes follow the trailer.
    TrailingBytes,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Header,
    Extension(u32),
    TupleCount,
    FieldLen,
    FieldData(u32),
    Done,
}

/// Push parser for binary COPY framing.
#[derive(Clone, Debug)]
pub struct FrameChecker {
    state: State,
    small: [u8; FIXED_HEADER],
    have: usize,
    fields: u16,
    key_fields: u16,
    field: u16,
    rows: u64,
    bytes: u64,
}

impl FrameChecker {
    /// A checker for tuples of `fields` fields whose first `key_fields` must be non-null.
    pub fn new(fields: u16, key_fields: u16) -> Self {
        Self {
            state: State::Header,
            small: [0; FIXED_HEADER],
            have: 0,
            fields,
            key_fields,
            field: 0,
            rows: 0,
            bytes: 0,
        }
    }

    /// Tuples seen so far.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Bytes seen so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Whether the trailer has been seen.
    pub fn complete(&self) -> bool {
        self.state == State::Done
    }

    /// Feeds the next chunk.
    pub fn push(&mut self, mut data: &[u8]) -> Result<(), FrameError> {
        self.bytes += data.len() as u64;
        while !data.is_empty() {
            // Whole tuples at the start of `data` are read in place; a tuple split across
            // chunks, the trailer and the header go through the states below one by one.
            if self.state == State::TupleCount && self.have == 0 {
                while let Some(used) = self.whole_tuple(data)? {
                    data = &data[used..];
                }
                if data.is_empty() {
                    break;
                }
            }
            match self.state {
                State::Done => return Err(FrameError::TrailingBytes),
                State::FieldData(remaining) => {
                    let take = (remaining as usize).min(data.len());
                    data = &data[take..];
                    let left = remaining - take as u32;
                    if left == 0 {
                        self.next_field();
                    } else {
                        self.state = State::FieldData(left);
                    }
                }
                State::Extension(remaining) => {
                    let take = (remaining as usize).min(data.len());
                    data = &data[take..];
                    let left = remaining - take as u32;
                    self.state = if left == 0 {
                        State::TupleCount
                    } else {
                        State::Extension(left)
                    };
                }
                State::Header | State::TupleCount | State::FieldLen => {
                    let need = match self.state {
                        State::Header => FIXED_HEADER,
                        State::TupleCount => 2,
                        _ => 4,
                    };
                    let take = (need - self.have).min(data.len());
                    self.small[self.have..self.have + take].copy_from_slice(&data[..take]);
                    self.have += take;
                    data = &data[take..];
                    if self.have == need {
                        self.have = 0;
                        self.on_fixed()?;
                    }
                }
            }
        }
        Ok(())
    }

    fn on_fixed(&mut self) -> Result<(), FrameError> {
        match self.state {
            State::Header => {
                if &self.small[..11] != SIGNATURE {
                    return Err(FrameError::Malformed);
                }
                let flags = u32::from_be_bytes([
                    self.small[11],
                    self.small[12],
                    self.small[13],
                    self.small[14],
                ]);
                // Bit 16: OIDs included. Bits 0-15 must be zero; 17-31 are reserved (ignored).
                if flags & 0x0001_ffff != 0 {
                    return Err(FrameError::Malformed);
                }
                let ext = u32::from_be_bytes([
                    self.small[15],
                    self.small[16],
                    self.small[17],
                    self.small[18],
                ]);
                self.state = if ext == 0 {
                    State::TupleCount
                } else {
                    State::Extension(ext)
                };
            }
            State::TupleCount => {
                let n = i16::from_be_bytes([self.small[0], self.small[1]]);
                if n == -1 {
                    self.state = State::Done;
                } else if n < 0 || n as u16 != self.fields {
                    return Err(FrameError::FieldCount);
                } else if n == 0 {
                    self.rows += 1;
                } else {
                    self.field = 0;
                    self.state = State::FieldLen;
                }
            }
            State::FieldLen => {
                let len = i32::from_be_bytes([
                    self.small[0],
                    self.small[1],
                    self.small[2],
                    self.small[3],
                ]);
                if len == -1 {
                    if self.field < self.key_fields {
                        return Err(FrameError::NullKey);
                    }
                    self.next_field();
                } else if len < 0 {
                    return Err(FrameError::Malformed);
                } else if len == 0 {
                    self.next_field();
                } else {
                    self.state = State::FieldData(len as u32);
                }
            }
            State::Extension(_) | State::FieldData(_) | State::Done => {}
        }
        Ok(())
    }

    /// Checks one complete tuple at the start of `data` without copying its lengths: `Some`
    /// with the bytes it spans (counted), `None` when `data` ends inside it or holds the trailer
    /// (nothing is consumed), or the error the field-by-field path gives at the same byte.
    fn whole_tuple(&mut self, data: &[u8]) -> Result<Option<usize>, FrameError> {
        let Some(count) = data.get(..2) else {
            return Ok(None);
        };
        let n = i16::from_be_bytes([count[0], count[1]]);
        if n == -1 {
            return Ok(None);
        }
        if n < 0 || n as u16 != self.fields {
            return Err(FrameError::FieldCount);
        }
        let mut at = 2usize;
        for field in 0..self.fields {
            let Some(len) = data.get(at..at + 4) else {
                return Ok(None);
            };
            let len = i32::from_be_bytes([len[0], len[1], len[2], len[3]]);
            at += 4;
            if len == -1 {
                if field < self.key_fields {
                    return Err(FrameError::NullKey);
                }
            } else if len < 0 {
                return Err(FrameError::Malformed);
            } else {
                at += len as usize;
                if at > data.len() {
                    return Ok(None);
                }
            }
        }
        self.rows += 1;
        Ok(Some(at))
    }

    fn next_field(&mut self) {
        self.field += 1;
        if self.field == self.fields {
            self.rows += 1;
            self.state = State::TupleCount;
        } else {
            self.state = State::FieldLen;
        }
    }
}

/// Test helper: encodes tuples of optional byte fields as a binary COPY stream.
pub fn encode_for_tests(rows: &[Vec<Option<&[u8]>>]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(SIGNATURE);
    out.extend_from_slice(&0u32.to_be_bytes());
    out.extend_from_slice(&0u32.to_be_bytes());
    for row in rows {
        out.extend_from_slice(&(row.len() as i16).to_be_bytes());
        for f in row {
            match f {
                None => out.extend_from_slice(&(-1i32).to_be_bytes()),
                Some(b) => {
                    out.extend_from_slice(&(b.len() as i32).to_be_bytes());
                    out.extend_from_slice(b);
                }
            }
        }
    }
    out.extend_from_slice(&(-1i16).to_be_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(
        stream: &[u8],
        chunk: usize,
        fields: u16,
        keys: u16,
    ) -> Result<(u64, bool), FrameError> {
        let mut c = FrameChecker::new(fields, keys);
        for part in stream.chunks(chunk.max(1)) {
            c.push(part)?;
        }
        Ok((c.rows(), c.complete()))
    }

    #[test]
    fn counts_rows_in_any_chunking() {
        let s = encode_for_tests(&[
            vec![Some(b"\0\0\0\x01"), Some(b"abc")],
            vec![Some(b"\0\0\0\x02"), None],
            vec![Some(b"\0\0\0\x03"), Some(b"")],
        ]);
        for chunk in [1, 2, 3, 7, 64, 4096] {
            assert_eq!(check(&s, chunk, 2, 1), Ok((3, true)), "chunk {chunk}");
        }
    }

    /// The in-place reading of whole tuples gives exactly what the byte-by-byte path gives
    /// (one-byte chunks never hold a whole tuple), for valid, truncated and damaged streams.
    #[test]
    fn whole_tuples_read_in_place_agree_with_byte_by_byte() {
        let s = encode_for_tests(&[
            vec![Some(b"\0\0\0\x01"), Some(b"abc")],
            vec![Some(b"\0\0\0\x02"), None],
            vec![Some(b"\0\0\0\x03"), Some(b"")],
            vec![Some(b"\0\0\0\x04"), Some(&[7u8; 300])],
        ]);
        let mut streams = vec![s.clone(), s[..s.len() - 1].to_vec(), s[..40].to_vec()];
        for at in 19..s.len() {
            for byte in [0x00, 0xff, 0x80, 0x02, 0x05] {
                let mut damaged = s.clone();
                damaged[at] = byte;
                streams.push(damaged);
            }
        }
        for stream in &streams {
            for (fields, keys) in [(2, 1), (2, 2), (2, 0), (3, 1)] {
                let reference = check(stream, 1, fields, keys);
                for chunk in [2, 3, 6, 11, 64, 4096] {
                    assert_eq!(
                        check(stream, chunk, fields, keys),
                        reference,
                        "chunk {chunk}, fields {fields}, keys {keys}"
                    );
                }
            }
        }
    }

    #[test]
    fn refusals() {
        let s = encode_for_tests(&[vec![None, Some(b"x")]]);
        assert_eq!(check(&s, 5, 2, 1), Err(FrameError::NullKey));
        let s = encode_for_tests(&[vec![Some(b"x")]]);
        assert_eq!(check(&s, 5, 2, 1), Err(FrameError::FieldCount));
        let mut s = encode_for_tests(&[vec![Some(b"x"), Some(b"y")]]);
        let truncated = &s[..s.len() - 2];
        assert_eq!(check(truncated, 5, 2, 1), Ok((1, false)));
        s.push(0);
        assert_eq!(check(&s, 5, 2, 1), Err(FrameError::TrailingBytes));
        let mut bad = encode_for_tests(&[]);
        bad[0] = b'X';
        assert_eq!(check(&bad, 5, 2, 1), Err(FrameError::Malformed));
    }
}
