//! The input boundary of `dpone-host`: every file a user names is read through [`read`], every
//! JSON document `dpone-trust` and the engines accept is parsed by [`strict_json`], and every
//! error that quotes text an attacker may have chosen goes through [`text`].
//!
//! - [`read::read_regular`] reads a *regular file* (a symlink to one is fine) of at most a given
//!   number of bytes. Anything else — a FIFO, a socket, a device, a directory, a file under
//!   `/proc`, `/sys` or `/dev` — is refused before a single byte is read, and a FIFO never
//!   blocks: the file is opened with `O_NONBLOCK`, and the opened descriptor's inode must be the
//!   regular file that was inspected.
//! - [`read::hash_regular`] hashes a regular file as a stream (artifacts are never held whole).
//! - [`strict_json::parse`] reads one JSON document strictly: a size limit, an optional depth
//!   bound, no duplicate key at any depth, only integers in `0..=2^53-1`;
//!   [`strict_json::check_canonical`] refuses bytes that are not exactly the RFC 8785 encoding of
//!   their value. Faults are structured; each caller maps them to its own codes.
//! - [`text::excerpt`] quotes a value: at most [`text::MAX_EXCERPT_CHARS`] characters, with
//!   control, line/paragraph separator, bidi and other format characters escaped;
//!   [`text::clean_message`] makes a whole one-line error message safe the same way.
//! - [`private_state`] checks the directories and files the host keeps its own state in (owner,
//!   mode, symbolic links, swappable parents) before they are read or written.

pub mod private_state;
pub mod read;
pub mod strict_json;
pub mod text;
