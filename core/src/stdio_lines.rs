//! Newline-delimited framing of a byte stream: what a stdio MCP server writes to its stdout
//! (the stdio transport: "messages are delimited by newlines, and MUST NOT contain embedded
//! newlines"), read in chunks of any size.
//!
//! [`LineFramer`] keeps an unfinished line until its newline comes and reports a line longer
//! than its limit ([`MAX_STDIO_LINE`] by default) as [`Piece::Overlong`] pieces instead of
//! keeping it, so a reader never buffers more than the limit and never sees a cut message.
//! The MCP client ([`crate::mcp::Client::handle_stdio_bytes`]) skips an over-long line whole;
//! a reader that wants to know what the line was (its id) can scan the pieces in passing.

/// The longest stdout line of a stdio server that is kept (16 MiB, the newline not counted).
pub const MAX_STDIO_LINE: usize = 16 * 1024 * 1024;

/// What [`LineFramer::push`] and [`LineFramer::finish`] find in the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Piece<'a> {
    /// A whole line of at most the limit, without its `\n` (a `\r` before it is kept).
    Line(&'a [u8]),
    /// Bytes of a line longer than the limit, in order (the first piece holds what was kept
    /// of its start). Nothing of it is kept.
    Overlong(&'a [u8]),
    /// The over-long line ended (its newline came, or the stream ended).
    OverlongEnd,
}

/// Lines of a byte stream, across reads (see the module docs).
#[derive(Debug)]
pub struct LineFramer {
    /// The start of a line whose newline has not come yet.
    partial: Vec<u8>,
    /// The current line went over the limit: its bytes up to its newline are not kept.
    skipping: bool,
    max: usize,
}

impl Default for LineFramer {
    /// A framer with the [`MAX_STDIO_LINE`] limit.
    fn default() -> Self {
        LineFramer::new(MAX_STDIO_LINE)
    }
}

impl LineFramer {
    /// A framer that keeps lines of at most `max` bytes (the newline not counted).
    pub fn new(max: usize) -> LineFramer {
        LineFramer {
            partial: Vec::new(),
            skipping: false,
            max,
        }
    }

    /// The limit.
    pub fn max(&self) -> usize {
        self.max
    }

    /// Bytes kept of a line whose newline has not come yet.
    pub fn buffered(&self) -> usize {
        self.partial.len()
    }

    /// Takes the next bytes of the stream and calls `piece` with what they complete, in order.
    /// A line that fits in `bytes` whole is handed over without a copy.
    pub fn push(&mut self, mut bytes: &[u8], mut piece: impl FnMut(Piece<'_>)) {
        while let Some(at) = bytes.iter().position(|&b| b == b'\n') {
            let (head, rest) = bytes.split_at(at);
            bytes = rest.get(1..).unwrap_or_default();
            if std::mem::take(&mut self.skipping) {
                if !head.is_empty() {
                    piece(Piece::Overlong(head));
                }
                piece(Piece::OverlongEnd);
                continue;
            }
            if self.partial.is_empty() {
                if head.len() <= self.max {
                    piece(Piece::Line(head));
                } else {
                    piece(Piece::Overlong(head));
                    piece(Piece::OverlongEnd);
                }
            } else {
                let whole = self.partial.len() + head.len();
                if whole <= self.max {
                    self.partial.extend_from_slice(head);
                    piece(Piece::Line(&self.partial));
                } else {
                    piece(Piece::Overlong(&self.partial));
                    piece(Piece::Overlong(head));
                    piece(Piece::OverlongEnd);
                }
                self.partial.clear();
            }
        }
        if self.skipping {
            if !bytes.is_empty() {
                piece(Piece::Overlong(bytes));
            }
            return;
        }
        if self.partial.len() + bytes.len() > self.max {
            let kept = std::mem::take(&mut self.partial);
            if !kept.is_empty() {
                piece(Piece::Overlong(&kept));
            }
            piece(Piece::Overlong(bytes));
            self.skipping = true;
        } else {
            self.partial.extend_from_slice(bytes);
        }
    }

    /// The stream ended: its last line, if it had no newline (or the end of an over-long
    /// one). The framer is then ready for a new stream.
    pub fn finish(&mut self, mut piece: impl FnMut(Piece<'_>)) {
        let rest = std::mem::take(&mut self.partial);
        if std::mem::take(&mut self.skipping) {
            piece(Piece::OverlongEnd);
        } else if !rest.is_empty() {
            piece(Piece::Line(&rest));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{LineFramer, Piece};

    /// The lines kept (as text, bytes that are not UTF-8 replaced), as the MCP client sees them.
    fn lines_of(chunks: &[&[u8]], max: usize) -> Vec<String> {
        let mut framer = LineFramer::new(max);
        let mut out = Vec::new();
        let mut keep = |p: Piece<'_>| {
            if let Piece::Line(l) = p {
                out.push(String::from_utf8_lossy(l).into_owned());
            }
        };
        for chunk in chunks {
            framer.push(chunk, &mut keep);
        }
        framer.finish(&mut keep);
        out
    }

    #[test]
    fn a_line_split_across_reads_is_joined() {
        let got = lines_of(&[b"{\"a\":", b"1}\n{\"b\"", b":2}\n"], 100);
        assert_eq!(got, ["{\"a\":1}", "{\"b\":2}"]);
    }

    #[test]
    fn several_lines_in_one_read_come_out_in_order() {
        let got = lines_of(&[b"one\ntwo\n\nthree\n"], 100);
        assert_eq!(got, ["one", "two", "", "three"]);
    }

    #[test]
    fn the_last_line_without_a_newline_is_kept_at_the_end() {
        assert_eq!(lines_of(&[b"one\ntw", b"o"], 100), ["one", "two"]);
        assert!(lines_of(&[b"one\n"], 100).len() == 1);
    }

    #[test]
    fn an_over_long_line_is_skipped_whole_and_the_next_one_kept() {
        // Over the limit within one read, across reads, and ending in the read that completes it.
        assert_eq!(lines_of(&[b"0123456789\nok\n"], 5), ["ok"]);
        assert_eq!(lines_of(&[b"012", b"345", b"6789\nok\n"], 5), ["ok"]);
        assert_eq!(lines_of(&[b"0123", b"456\nok\n"], 5), ["ok"]);
        assert_eq!(lines_of(&[b"0123456789"], 5), Vec::<String>::new());
        // Exactly the limit is not over it.
        assert_eq!(lines_of(&[b"012", b"34\n"], 5), ["01234"]);
    }

    #[test]
    fn bytes_that_are_not_utf8_are_replaced_not_dropped() {
        assert_eq!(lines_of(&[b"a\xffb\n"], 100), ["a\u{fffd}b"]);
    }

    #[test]
    fn an_over_long_line_comes_out_as_its_pieces_then_its_end() {
        /// What one call reported: the over-long bytes, and how many ends.
        fn note(framer: &mut LineFramer, bytes: Option<&[u8]>) -> (Vec<u8>, usize) {
            let (mut seen, mut ends) = (Vec::new(), 0);
            let mut f = |p: Piece<'_>| match p {
                Piece::Overlong(b) => seen.extend_from_slice(b),
                Piece::OverlongEnd => ends += 1,
                Piece::Line(_) => {}
            };
            match bytes {
                Some(b) => framer.push(b, &mut f),
                None => framer.finish(&mut f),
            }
            (seen, ends)
        }
        let mut framer = LineFramer::new(5);
        assert_eq!(note(&mut framer, Some(b"012")), (Vec::new(), 0));
        assert_eq!(note(&mut framer, Some(b"345")), (b"012345".to_vec(), 0));
        assert_eq!(note(&mut framer, Some(b"67\nok")), (b"67".to_vec(), 1));
        // Nothing of it is kept; the next line is.
        assert_eq!(framer.buffered(), 2);
        assert_eq!(
            note(&mut framer, Some(b"0123456")),
            (b"ok0123456".to_vec(), 0)
        );
        assert_eq!(note(&mut framer, None), (Vec::new(), 1));
        assert_eq!(framer.buffered(), 0);
    }
}
