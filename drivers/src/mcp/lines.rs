//! A stdio server's stdout cut into lines: newline-delimited JSON-RPC, read in chunks of any size.
//!
//! The reader hands over whatever bytes it got; [`LineBuffer`] keeps an unfinished line until its
//! newline comes, and skips a line longer than its limit whole, so the core never sees a cut
//! message. Bytes that are not UTF-8 are replaced (the core then reports the line as no JSON-RPC).

/// Lines of a byte stream, across reads (see the module docs).
#[derive(Debug)]
pub(crate) struct LineBuffer {
    /// The start of a line whose newline has not come yet.
    partial: Vec<u8>,
    /// The current line went over the limit: drop bytes up to its newline.
    skipping: bool,
    max: usize,
}

impl LineBuffer {
    /// A buffer that skips lines longer than `max` bytes (the newline not counted).
    pub(crate) fn new(max: usize) -> LineBuffer {
        LineBuffer {
            partial: Vec::new(),
            skipping: false,
            max,
        }
    }

    /// Takes the next bytes of the stream and calls `line` with each line they complete
    /// (without its newline), in order.
    pub(crate) fn push(&mut self, mut bytes: &[u8], mut line: impl FnMut(String)) {
        while let Some(at) = bytes.iter().position(|&b| b == b'\n') {
            let (head, rest) = (&bytes[..at], &bytes[at + 1..]);
            bytes = rest;
            if std::mem::take(&mut self.skipping) {
                continue;
            }
            if self.partial.is_empty() {
                if head.len() <= self.max {
                    line(String::from_utf8_lossy(head).into_owned());
                }
            } else {
                let whole = self.partial.len() + head.len();
                if whole <= self.max {
                    self.partial.extend_from_slice(head);
                    line(String::from_utf8_lossy(&self.partial).into_owned());
                }
                self.partial.clear();
            }
        }
        if self.skipping {
            return;
        }
        if self.partial.len() + bytes.len() > self.max {
            self.partial = Vec::new();
            self.skipping = true;
        } else {
            self.partial.extend_from_slice(bytes);
        }
    }

    /// The stream ended: its last line, if it had no newline.
    pub(crate) fn finish(&mut self) -> Option<String> {
        let skipped = std::mem::take(&mut self.skipping);
        let rest = std::mem::take(&mut self.partial);
        (!skipped && !rest.is_empty()).then(|| String::from_utf8_lossy(&rest).into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::LineBuffer;

    fn lines_of(chunks: &[&[u8]], max: usize) -> Vec<String> {
        let mut buffer = LineBuffer::new(max);
        let mut out = Vec::new();
        for chunk in chunks {
            buffer.push(chunk, |l| out.push(l));
        }
        out.extend(buffer.finish());
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
}
