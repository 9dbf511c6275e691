//! The input boundary of `dpone-host`: every file a user names is read through [`read`] and
//! every error that quotes text an attacker may have chosen goes through [`text`].
//!
//! - [`read::read_regular`] reads a *regular file* (a symlink to one is fine) of at most a given
//!   number of bytes. Anything else — a FIFO, a socket, a device, a directory, a file under
//!   `/proc`, `/sys` or `/dev` — is refused before a single byte is read, and a FIFO never
//!   blocks: the file is opened with `O_NONBLOCK`, and the opened descriptor's inode must be the
//!   regular file that was inspected.
//! - [`read::hash_regular`] hashes a regular file as a stream (artifacts are never held whole).
//! - [`text::excerpt`] quotes a value: at most [`text::MAX_EXCERPT_CHARS`] characters, with
//!   control, line/paragraph separator, bidi and other format characters escaped;
//!   [`text::clean_message`] makes a whole one-line error message safe the same way.

pub mod read;
pub mod text;
