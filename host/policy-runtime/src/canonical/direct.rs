//! The direct canonical JSON writer: a `serde::Serializer` that writes canonical JSON straight
//! into a byte buffer, without building a `serde_json::Value` first.
//!
//! An object's entries (`"key":value`) are written in the order `Serialize` produces them, with
//! their keys remembered; when the object ends they are put into RFC 8785 key order (UTF-16 code
//! units) by one copy through a scratch buffer, unless they are in order already. Buffers are
//! kept between calls, so a warm writer does not allocate.
//!
//! Anything outside the value space of the policy contract ([`GaveUp`]) ends the attempt; the
//! caller then takes the reference path through a `serde_json::Value`, which decides the bytes
//! or the error.

use serde::ser::{self, Serialize};
use std::cmp::Ordering;
use std::ops::Range;

/// The value is outside what the direct writer handles (or its `Serialize` failed); the
/// reference writer must decide.
#[derive(Debug)]
pub(crate) struct GaveUp;

impl std::fmt::Display for GaveUp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("outside the direct canonical writer's value space")
    }
}

impl std::error::Error for GaveUp {}

impl ser::Error for GaveUp {
    fn custom<T: std::fmt::Display>(_msg: T) -> Self {
        GaveUp
    }
}

/// One object entry written to `out`: its key (a struct field's name, or a range of `keys`) and
/// the bytes of
/// `"key":value` (a range of `out`, without the separating comma).
struct Entry {
    key: Range<usize>,
    bytes: Range<usize>,
    /// The key has no character at or above U+E000, so byte order is its UTF-16 order. This and
    /// `prefix` are set by `Object::finish` before it compares keys; an object whose fields
    /// match a known order is never compared.
    simple: bool,
    /// The key's first eight bytes, big-endian, zero-padded: byte order of simple keys decided
    /// in one comparison unless the prefixes are equal.
    prefix: u64,
    /// The field name, for a struct field (whose name is `'static`); its `key` range is empty.
    field: Option<&'static str>,
    /// Position of the entry in the order `Serialize` wrote it.
    arrival: usize,
}

/// The key order of one sequence of struct fields, found once and then reused: a struct type
/// writes the same fields in the same order every time, so its entries need not be compared
/// again. A sequence matches only if every field name is the same `'static` string (same
/// address and length, hence the same bytes), so a match can only give the order a sort would.
struct FieldOrder {
    fields: Vec<&'static str>,
    /// Arrival positions in key order; `None` when the fields arrive in key order.
    sorted: Option<Vec<usize>>,
}

impl Entry {
    /// The entry's key: the field name of a struct field, else its range of `keys`.
    fn name<'k>(&self, keys: &'k str) -> &'k str {
        match self.field {
            Some(name) => name,
            None => &keys[self.key.clone()],
        }
    }
}

impl FieldOrder {
    fn matches(&self, entries: &[Entry]) -> bool {
        self.fields.len() == entries.len()
            && self.fields.iter().zip(entries).all(|(name, entry)| {
                entry.field.is_some_and(|f| {
                    std::ptr::eq(f.as_ptr(), name.as_ptr()) && f.len() == name.len()
                })
            })
    }
}

/// Field orders remembered per writer; a bound, so a program with many struct types cannot
/// grow a thread's writer without limit.
const MAX_FIELD_ORDERS: usize = 64;

/// The first eight bytes of `key` as a big-endian number, zero-padded. For any two keys, a
/// smaller prefix means a smaller key in byte order; equal prefixes decide nothing.
fn prefix(key: &str) -> u64 {
    let mut bytes = [0u8; 8];
    let n = key.len().min(8);
    bytes[..n].copy_from_slice(&key.as_bytes()[..n]);
    u64::from_be_bytes(bytes)
}

/// `00`, `01`, … `99`: the decimal digits of every number below 100.
const DIGIT_PAIRS: [u8; 200] = {
    let mut pairs = [0u8; 200];
    let mut n = 0;
    while n < 100 {
        pairs[2 * n] = b'0' + (n / 10) as u8;
        pairs[2 * n + 1] = b'0' + (n % 10) as u8;
        n += 1;
    }
    pairs
};

/// The writer and the buffers it reuses.
#[derive(Default)]
pub(crate) struct Writer {
    out: Vec<u8>,
    scratch: Vec<u8>,
    entries: Vec<Entry>,
    keys: String,
    orders: Vec<FieldOrder>,
}

impl Writer {
    /// Writes `value` as canonical JSON into the (cleared) buffer.
    pub(crate) fn write<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), GaveUp> {
        self.clear();
        let written = value.serialize(&mut *self);
        if written.is_err() {
            self.clear();
        }
        written
    }

    /// The bytes of the last successful [`Writer::write`].
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.out
    }

    /// The bytes of the last successful [`Writer::write`], taken out of the writer.
    pub(crate) fn into_bytes(self) -> Vec<u8> {
        self.out
    }

    /// Forgets what was written; keeps the buffers' capacity and the field orders learnt.
    pub(crate) fn clear(&mut self) {
        self.out.clear();
        self.scratch.clear();
        self.entries.clear();
        self.keys.clear();
    }

    fn write_str(&mut self, s: &str) -> Result<(), GaveUp> {
        write_json_str(&mut self.out, s)
    }

    fn write_u64(&mut self, v: u64) {
        write_u64(&mut self.out, v);
    }

    fn write_i64(&mut self, v: i64) {
        write_i64(&mut self.out, v);
    }

    fn begin_object(&mut self, close_variant: bool) -> Object<'_> {
        self.out.push(b'{');
        Object {
            body: self.out.len(),
            first_entry: self.entries.len(),
            first_key: self.keys.len(),
            pending_key: None,
            close_variant,
            w: self,
        }
    }

    /// `{"variant":` of an externally tagged enum variant.
    fn begin_variant(&mut self, variant: &str) -> Result<(), GaveUp> {
        self.out.push(b'{');
        self.write_str(variant)?;
        self.out.push(b':');
        Ok(())
    }
}

/// Writes `v` in decimal, as serde_json writes a `u64`.
pub(super) fn write_u64(out: &mut Vec<u8>, mut v: u64) {
    // The digits are put at the start of a buffer of fixed size, which is appended whole and
    // cut back to their number: a copy of fixed size, not a `memcpy` call.
    let len = v.checked_ilog10().map_or(1, |log| log as usize + 1);
    let mut digits = [0u8; 20];
    let mut i = len;
    // Two digits per division.
    while v >= 100 {
        // `v % 100` is below 100.
        let pair = (v % 100) as usize * 2;
        v /= 100;
        i -= 2;
        digits[i..i + 2].copy_from_slice(&DIGIT_PAIRS[pair..pair + 2]);
    }
    if v >= 10 {
        // `v` is below 100 here.
        let pair = v as usize * 2;
        i -= 2;
        digits[i..i + 2].copy_from_slice(&DIGIT_PAIRS[pair..pair + 2]);
    } else {
        i -= 1;
        // `v` is a single decimal digit here.
        digits[i] = b'0' + v as u8;
    }
    let start = out.len();
    out.extend_from_slice(&digits);
    out.truncate(start + len);
}

/// Writes `v` in decimal, as serde_json writes an `i64`.
pub(super) fn write_i64(out: &mut Vec<u8>, v: i64) {
    if v < 0 {
        out.push(b'-');
    }
    write_u64(out, v.unsigned_abs());
}

/// Writes `s` as a JSON string exactly as serde_json does (the reference writer's escaping):
/// serde_json escapes only `"`, `\` and control characters below U+0020; a string without
/// them is copied between quotes, anything else goes through serde_json itself.
pub(super) fn write_json_str(out: &mut Vec<u8>, s: &str) -> Result<(), GaveUp> {
    if !needs_escape(s.as_bytes()) {
        out.reserve(s.len() + 2);
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
        Ok(())
    } else {
        serde_json::to_writer(out, s).map_err(|_| GaveUp)
    }
}

/// True if `bytes` holds a byte serde_json escapes in a string: `"`, `\\` or a control
/// character below U+0020.
///
/// Eight bytes at a time: keys and short strings are too short for the compiler's vector loop,
/// and a byte at a time was a tenth of the input digest's instructions. Each test is exact for
/// "some byte of the word is ...": `(x - 0x01…01 * n) & !x & 0x80…80` is non-zero if and only if
/// a byte of `x` is below `n` (for `n` ≤ 0x80), and a byte equal to `c` is a zero byte of
/// `x ^ 0x01…01 * c`.
pub(crate) fn needs_escape(bytes: &[u8]) -> bool {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGH: u64 = u64::from_ne_bytes([0x80; 8]);
    fn below(x: u64, n: u8) -> u64 {
        x.wrapping_sub(ONES * u64::from(n)) & !x
    }
    fn word(x: u64) -> bool {
        (below(x, 0x20)
            | below(x ^ (ONES * u64::from(b'"')), 1)
            | below(x ^ (ONES * u64::from(b'\\')), 1))
            & HIGH
            != 0
    }
    let load = |chunk: &[u8]| {
        let mut w = [0u8; 8];
        w.copy_from_slice(chunk);
        u64::from_ne_bytes(w)
    };
    let n = bytes.len();
    if n < 8 {
        // Without a copy of variable length (a `memcpy` call): four bytes from each end
        // (overlapping) cover four to seven bytes; the first, middle and last byte cover one to
        // three. Unused bytes of the word are a byte that is never escaped.
        let w = match (bytes.first_chunk::<4>(), bytes.last_chunk::<4>()) {
            (Some(head), Some(tail)) => {
                u64::from(u32::from_ne_bytes(*head)) | (u64::from(u32::from_ne_bytes(*tail)) << 32)
            }
            _ => match (bytes.first(), bytes.get(n / 2), bytes.last()) {
                (Some(&a), Some(&b), Some(&c)) => {
                    u64::from_ne_bytes([a, b, c, b'a', b'a', b'a', b'a', b'a'])
                }
                _ => return false,
            },
        };
        return word(w);
    }
    let mut chunks = bytes.chunks_exact(8);
    let mut any = false;
    for chunk in &mut chunks {
        any |= word(load(chunk));
    }
    // The last eight bytes, overlapping the chunks already checked.
    any | word(load(&bytes[bytes.len() - 8..]))
}

/// RFC 8785 key order (UTF-16 code units) of two entries' keys. Byte order is the same unless
/// a key has a character at or above U+E000.
fn key_order(keys: &str, a: &Entry, b: &Entry) -> Ordering {
    let (ka, kb) = (a.name(keys), b.name(keys));
    if a.simple && b.simple {
        a.prefix
            .cmp(&b.prefix)
            .then_with(|| ka.as_bytes().cmp(kb.as_bytes()))
    } else {
        super::utf16_order(ka, kb)
    }
}

/// An array being written (also the array of a tuple variant).
pub(crate) struct Array<'a> {
    w: &'a mut Writer,
    first: bool,
    close_variant: bool,
}

impl Array<'_> {
    fn element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), GaveUp> {
        if !self.first {
            self.w.out.push(b',');
        }
        self.first = false;
        value.serialize(&mut *self.w)
    }

    fn finish(self) -> Result<(), GaveUp> {
        self.w.out.push(b']');
        if self.close_variant {
            self.w.out.push(b'}');
        }
        Ok(())
    }
}

/// An object being written (a struct, a map, or the object of a struct variant).
pub(crate) struct Object<'a> {
    w: &'a mut Writer,
    /// Where the object's entries start in `out` (just after `{`).
    body: usize,
    /// This object's entries are `entries[first_entry..]`, its keys `keys[first_key..]`.
    first_entry: usize,
    first_key: usize,
    /// A map key given to `serialize_key` and not yet followed by its value.
    pending_key: Option<Range<usize>>,
    close_variant: bool,
}

impl Object<'_> {
    /// Writes `"key":value` for a key already in `keys[key]`.
    fn entry<T: Serialize + ?Sized>(
        &mut self,
        key: Range<usize>,
        field: Option<&'static str>,
        value: &T,
    ) -> Result<(), GaveUp> {
        let w = &mut *self.w;
        let arrival = w.entries.len() - self.first_entry;
        if w.entries.len() > self.first_entry {
            w.out.push(b',');
        }
        let start = w.out.len();
        match field {
            Some(name) => write_json_str(&mut w.out, name)?,
            None => write_json_str(&mut w.out, &w.keys[key.clone()])?,
        }
        w.out.push(b':');
        value.serialize(&mut *w)?;
        w.entries.push(Entry {
            key,
            bytes: start..w.out.len(),
            // Found by `finish` when it has to compare keys (not for a known field order).
            simple: false,
            prefix: 0,
            field,
            arrival,
        });
        Ok(())
    }

    /// A struct field: its name is `'static`, so it is not copied into `keys`.
    fn field<T: Serialize + ?Sized>(&mut self, key: &'static str, value: &T) -> Result<(), GaveUp> {
        let none = self.w.keys.len();
        self.entry(none..none, Some(key), value)
    }

    /// Puts the entries into key order (refusing duplicate keys) and closes the object.
    fn finish(self) -> Result<(), GaveUp> {
        let Writer {
            out,
            scratch,
            entries,
            keys,
            orders,
        } = &mut *self.w;
        let mine = &mut entries[self.first_entry..];
        if let Some(known) = orders.iter().find(|o| o.matches(mine)) {
            if let Some(sorted) = &known.sorted {
                reorder(out, scratch, self.body, sorted.iter().map(|&i| &mine[i]));
            }
        } else {
            for entry in mine.iter_mut() {
                let name = entry.name(keys);
                entry.simple = super::byte_order_is_utf16_order(name);
                entry.prefix = prefix(name);
            }
            let mut in_order = true;
            for pair in mine.windows(2) {
                match key_order(keys, &pair[0], &pair[1]) {
                    Ordering::Less => {}
                    Ordering::Equal => return Err(GaveUp),
                    Ordering::Greater => in_order = false,
                }
            }
            let fields: Option<Vec<&'static str>> = mine.iter().map(|e| e.field).collect();
            if !in_order {
                mine.sort_unstable_by(|a, b| key_order(keys, a, b));
                reorder(out, scratch, self.body, mine.iter());
            }
            if let Some(fields) = fields
                && orders.len() < MAX_FIELD_ORDERS
            {
                let sorted = (!in_order).then(|| mine.iter().map(|e| e.arrival).collect());
                orders.push(FieldOrder { fields, sorted });
            }
        }
        out.push(b'}');
        if self.close_variant {
            out.push(b'}');
        }
        entries.truncate(self.first_entry);
        keys.truncate(self.first_key);
        Ok(())
    }
}

/// Rewrites the entries of an object whose body starts at `body` in `out` in the order given,
/// comma-separated.
fn reorder<'e>(
    out: &mut Vec<u8>,
    scratch: &mut Vec<u8>,
    body: usize,
    in_key_order: impl Iterator<Item = &'e Entry>,
) {
    scratch.clear();
    scratch.extend_from_slice(&out[body..]);
    out.truncate(body);
    for (i, entry) in in_key_order.enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(&scratch[entry.bytes.start - body..entry.bytes.end - body]);
    }
}

/// True for the names serde_json gives its private types (raw values, arbitrary-precision
/// numbers), which its `Value` serializer treats specially.
fn serde_json_private(name: &str) -> bool {
    name.starts_with("$serde_json")
}

impl<'a> ser::Serializer for &'a mut Writer {
    type Ok = ();
    type Error = GaveUp;
    type SerializeSeq = Array<'a>;
    type SerializeTuple = Array<'a>;
    type SerializeTupleStruct = Array<'a>;
    type SerializeTupleVariant = Array<'a>;
    type SerializeMap = Object<'a>;
    type SerializeStruct = Object<'a>;
    type SerializeStructVariant = Object<'a>;

    fn serialize_bool(self, v: bool) -> Result<(), GaveUp> {
        self.out
            .extend_from_slice(if v { b"true" } else { b"false" });
        Ok(())
    }

    fn serialize_i8(self, v: i8) -> Result<(), GaveUp> {
        self.write_i64(v.into());
        Ok(())
    }

    fn serialize_i16(self, v: i16) -> Result<(), GaveUp> {
        self.write_i64(v.into());
        Ok(())
    }

    fn serialize_i32(self, v: i32) -> Result<(), GaveUp> {
        self.write_i64(v.into());
        Ok(())
    }

    fn serialize_i64(self, v: i64) -> Result<(), GaveUp> {
        self.write_i64(v);
        Ok(())
    }

    fn serialize_u8(self, v: u8) -> Result<(), GaveUp> {
        self.write_u64(v.into());
        Ok(())
    }

    fn serialize_u16(self, v: u16) -> Result<(), GaveUp> {
        self.write_u64(v.into());
        Ok(())
    }

    fn serialize_u32(self, v: u32) -> Result<(), GaveUp> {
        self.write_u64(v.into());
        Ok(())
    }

    fn serialize_u64(self, v: u64) -> Result<(), GaveUp> {
        self.write_u64(v);
        Ok(())
    }

    fn serialize_i128(self, _v: i128) -> Result<(), GaveUp> {
        Err(GaveUp)
    }

    fn serialize_u128(self, _v: u128) -> Result<(), GaveUp> {
        Err(GaveUp)
    }

    fn serialize_f32(self, _v: f32) -> Result<(), GaveUp> {
        Err(GaveUp)
    }

    fn serialize_f64(self, _v: f64) -> Result<(), GaveUp> {
        Err(GaveUp)
    }

    fn serialize_char(self, v: char) -> Result<(), GaveUp> {
        self.write_str(v.encode_utf8(&mut [0u8; 4]))
    }

    fn serialize_str(self, v: &str) -> Result<(), GaveUp> {
        self.write_str(v)
    }

    fn serialize_bytes(self, _v: &[u8]) -> Result<(), GaveUp> {
        Err(GaveUp)
    }

    fn serialize_none(self) -> Result<(), GaveUp> {
        self.serialize_unit()
    }

    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), GaveUp> {
        value.serialize(self)
    }

    fn serialize_unit(self) -> Result<(), GaveUp> {
        self.out.extend_from_slice(b"null");
        Ok(())
    }

    fn serialize_unit_struct(self, _name: &'static str) -> Result<(), GaveUp> {
        self.serialize_unit()
    }

    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<(), GaveUp> {
        self.write_str(variant)
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        name: &'static str,
        value: &T,
    ) -> Result<(), GaveUp> {
        if serde_json_private(name) {
            return Err(GaveUp);
        }
        value.serialize(self)
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<(), GaveUp> {
        self.begin_variant(variant)?;
        value.serialize(&mut *self)?;
        self.out.push(b'}');
        Ok(())
    }

    fn serialize_seq(self, _len: Option<usize>) -> Result<Array<'a>, GaveUp> {
        self.out.push(b'[');
        Ok(Array {
            w: self,
            first: true,
            close_variant: false,
        })
    }

    fn serialize_tuple(self, len: usize) -> Result<Array<'a>, GaveUp> {
        self.serialize_seq(Some(len))
    }

    fn serialize_tuple_struct(self, _name: &'static str, len: usize) -> Result<Array<'a>, GaveUp> {
        self.serialize_seq(Some(len))
    }

    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Array<'a>, GaveUp> {
        self.begin_variant(variant)?;
        self.out.push(b'[');
        Ok(Array {
            w: self,
            first: true,
            close_variant: true,
        })
    }

    fn serialize_map(self, _len: Option<usize>) -> Result<Object<'a>, GaveUp> {
        Ok(self.begin_object(false))
    }

    fn serialize_struct(self, name: &'static str, _len: usize) -> Result<Object<'a>, GaveUp> {
        if serde_json_private(name) {
            return Err(GaveUp);
        }
        Ok(self.begin_object(false))
    }

    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Object<'a>, GaveUp> {
        self.begin_variant(variant)?;
        Ok(self.begin_object(true))
    }
}

impl ser::SerializeSeq for Array<'_> {
    type Ok = ();
    type Error = GaveUp;

    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), GaveUp> {
        self.element(value)
    }

    fn end(self) -> Result<(), GaveUp> {
        self.finish()
    }
}

impl ser::SerializeTuple for Array<'_> {
    type Ok = ();
    type Error = GaveUp;

    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), GaveUp> {
        self.element(value)
    }

    fn end(self) -> Result<(), GaveUp> {
        self.finish()
    }
}

impl ser::SerializeTupleStruct for Array<'_> {
    type Ok = ();
    type Error = GaveUp;

    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), GaveUp> {
        self.element(value)
    }

    fn end(self) -> Result<(), GaveUp> {
        self.finish()
    }
}

impl ser::SerializeTupleVariant for Array<'_> {
    type Ok = ();
    type Error = GaveUp;

    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), GaveUp> {
        self.element(value)
    }

    fn end(self) -> Result<(), GaveUp> {
        self.finish()
    }
}

impl ser::SerializeMap for Object<'_> {
    type Ok = ();
    type Error = GaveUp;

    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), GaveUp> {
        if self.pending_key.is_some() {
            return Err(GaveUp);
        }
        let start = self.w.keys.len();
        key.serialize(KeyWriter(&mut self.w.keys))?;
        self.pending_key = Some(start..self.w.keys.len());
        Ok(())
    }

    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), GaveUp> {
        let key = self.pending_key.take().ok_or(GaveUp)?;
        self.entry(key, None, value)
    }

    fn end(self) -> Result<(), GaveUp> {
        if self.pending_key.is_some() {
            return Err(GaveUp);
        }
        self.finish()
    }
}

impl ser::SerializeStruct for Object<'_> {
    type Ok = ();
    type Error = GaveUp;

    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), GaveUp> {
        self.field(key, value)
    }

    fn end(self) -> Result<(), GaveUp> {
        self.finish()
    }
}

impl ser::SerializeStructVariant for Object<'_> {
    type Ok = ();
    type Error = GaveUp;

    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), GaveUp> {
        self.field(key, value)
    }

    fn end(self) -> Result<(), GaveUp> {
        self.finish()
    }
}

/// Appends a map key to the key buffer; only string keys are handled directly.
struct KeyWriter<'a>(&'a mut String);

impl ser::Serializer for KeyWriter<'_> {
    type Ok = ();
    type Error = GaveUp;
    type SerializeSeq = ser::Impossible<(), GaveUp>;
    type SerializeTuple = ser::Impossible<(), GaveUp>;
    type SerializeTupleStruct = ser::Impossible<(), GaveUp>;
    type SerializeTupleVariant = ser::Impossible<(), GaveUp>;
    type SerializeMap = ser::Impossible<(), GaveUp>;
    type SerializeStruct = ser::Impossible<(), GaveUp>;
    type SerializeStructVariant = ser::Impossible<(), GaveUp>;

    fn serialize_str(self, v: &str) -> Result<(), GaveUp> {
        self.0.push_str(v);
        Ok(())
    }

    fn serialize_bool(self, _v: bool) -> Result<(), GaveUp> {
        Err(GaveUp)
    }
    fn serialize_i8(self, _v: i8) -> Result<(), GaveUp> {
        Err(GaveUp)
    }
    fn serialize_i16(self, _v: i16) -> Result<(), GaveUp> {
        Err(GaveUp)
    }
    fn serialize_i32(self, _v: i32) -> Result<(), GaveUp> {
        Err(GaveUp)
    }
    fn serialize_i64(self, _v: i64) -> Result<(), GaveUp> {
        Err(GaveUp)
    }
    fn serialize_u8(self, _v: u8) -> Result<(), GaveUp> {
        Err(GaveUp)
    }
    fn serialize_u16(self, _v: u16) -> Result<(), GaveUp> {
        Err(GaveUp)
    }
    fn serialize_u32(self, _v: u32) -> Result<(), GaveUp> {
        Err(GaveUp)
    }
    fn serialize_u64(self, _v: u64) -> Result<(), GaveUp> {
        Err(GaveUp)
    }
    fn serialize_f32(self, _v: f32) -> Result<(), GaveUp> {
        Err(GaveUp)
    }
    fn serialize_f64(self, _v: f64) -> Result<(), GaveUp> {
        Err(GaveUp)
    }
    fn serialize_char(self, _v: char) -> Result<(), GaveUp> {
        Err(GaveUp)
    }
    fn serialize_bytes(self, _v: &[u8]) -> Result<(), GaveUp> {
        Err(GaveUp)
    }
    fn serialize_none(self) -> Result<(), GaveUp> {
        Err(GaveUp)
    }
    fn serialize_some<T: Serialize + ?Sized>(self, _value: &T) -> Result<(), GaveUp> {
        Err(GaveUp)
    }
    fn serialize_unit(self) -> Result<(), GaveUp> {
        Err(GaveUp)
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<(), GaveUp> {
        Err(GaveUp)
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
    ) -> Result<(), GaveUp> {
        Err(GaveUp)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _value: &T,
    ) -> Result<(), GaveUp> {
        Err(GaveUp)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _value: &T,
    ) -> Result<(), GaveUp> {
        Err(GaveUp)
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Self::SerializeSeq, GaveUp> {
        Err(GaveUp)
    }
    fn serialize_tuple(self, _len: usize) -> Result<Self::SerializeTuple, GaveUp> {
        Err(GaveUp)
    }
    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleStruct, GaveUp> {
        Err(GaveUp)
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleVariant, GaveUp> {
        Err(GaveUp)
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Self::SerializeMap, GaveUp> {
        Err(GaveUp)
    }
    fn serialize_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStruct, GaveUp> {
        Err(GaveUp)
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStructVariant, GaveUp> {
        Err(GaveUp)
    }
}
