//! The core's rule, checked: no module of `core/src` (its unit tests included) reads a clock,
//! draws a random number, or touches the network, the file system, a process, a thread or the
//! environment (`src/lib.rs`, `ARCHITECTURE.md`). Every `.rs` file under `core/src` is read with
//! its comments and string literals blanked out, and the code left must not name any of
//! [`FORBIDDEN`], nor `HashMap`/`HashSet` with the default hasher (`RandomState`, which draws
//! its keys from the OS): a map in the core is a `BTreeMap`/`BTreeSet`, or a `HashMap<K, V, S>`
//! with a fixed `S` (as `host::consent::provenance` has).
//!
//! A text check, not a proof: it catches the paths as they are usually written (`std::fs::…`,
//! `use std::{fs, …}`, `Instant::now()`), which is how they would come in by mistake.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

/// What no code in `core/src` may name, with the reason.
const FORBIDDEN: &[(&str, &str)] = &[
    ("Instant::now", "reads the clock"),
    ("SystemTime::now", "reads the clock"),
    (".elapsed(", "reads the clock"),
    ("RandomState", "draws random keys from the OS"),
    ("HashMap::new", "the default hasher draws random keys"),
    (
        "HashMap::with_capacity",
        "the default hasher draws random keys",
    ),
    ("HashMap::from(", "the default hasher draws random keys"),
    ("HashSet::new", "the default hasher draws random keys"),
    (
        "HashSet::with_capacity",
        "the default hasher draws random keys",
    ),
    ("HashSet::from(", "the default hasher draws random keys"),
    ("thread_rng", "draws a random number"),
    ("OsRng", "draws a random number"),
    ("getrandom", "draws a random number"),
    ("rand::", "draws a random number"),
    ("std::net", "touches the network"),
    ("std::fs", "touches the file system"),
    ("std::process", "touches a process"),
    ("std::thread", "starts or parks a thread"),
    ("std::env", "reads the process environment"),
    ("std::io::stdin", "reads the process's input"),
    ("std::io::stdout", "writes the process's output"),
    ("std::io::stderr", "writes the process's output"),
    ("println!", "writes the process's output"),
    ("print!", "writes the process's output"),
    ("eprintln!", "writes the process's output"),
    ("eprint!", "writes the process's output"),
    ("dbg!", "writes the process's output"),
];

/// The `std` modules that do I/O, as a `use std::{…}` group may name them.
const FORBIDDEN_STD_MODULES: &[&str] = &["net", "fs", "process", "thread", "env"];

/// `text` with every comment and string or character literal replaced by spaces (newlines
/// kept, so line numbers still hold).
fn code_only(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        let is_ident = |at: usize| {
            chars
                .get(at)
                .is_some_and(|&ch| ch.is_alphanumeric() || ch == '_')
        };
        // Whether an identifier ends just before `i` (a `b` or `c` prefix of a literal aside).
        let ident_before = i > 0
            && is_ident(i - 1)
            && !(matches!(chars[i - 1], 'b' | 'c') && (i < 2 || !is_ident(i - 2)));
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(chars[i]));
                    i += 1;
                }
            }
        } else if c == 'r' && !ident_before && matches!(next, Some('"' | '#')) {
            // A raw string r"…", r#"…"# (also after `b`/`c`), or a raw identifier r#name.
            let hashes = chars[i + 1..].iter().take_while(|&&h| h == '#').count();
            if chars.get(i + 1 + hashes) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            let close: String = std::iter::once('"')
                .chain(std::iter::repeat_n('#', hashes))
                .collect();
            let body_start = i + 2 + hashes;
            let rest: String = chars[body_start..].iter().collect();
            let body_len = rest
                .find(&close)
                .map_or(rest.chars().count(), |at| rest[..at].chars().count());
            let end = (body_start + body_len + close.chars().count()).min(chars.len());
            for &ch in &chars[i..end] {
                out.push(blank(ch));
            }
            i = end;
        } else if c == '"' {
            out.push(' ');
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                if let Some(&ch) = chars.get(i) {
                    out.push(blank(ch));
                }
                i += 1;
            }
            out.push(' ');
            i += 1;
        } else if c == '\'' {
            // A character literal ('x', '\n', '\u{..}', '"'); otherwise a lifetime.
            let literal_end = if next == Some('\\') {
                chars[i + 2..]
                    .iter()
                    .position(|&ch| ch == '\'')
                    .map(|p| i + 2 + p)
            } else if chars.get(i + 2) == Some(&'\'') {
                Some(i + 2)
            } else {
                None
            };
            match literal_end {
                Some(end) => {
                    for _ in i..=end {
                        out.push(' ');
                    }
                    i = end + 1;
                }
                None => {
                    out.push(c);
                    i += 1;
                }
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// The generic arguments of the type whose `<` is at the start of `after` (`K, V` in
/// `<K, V>`), counted at the top level; `None` when the list does not close.
fn generic_arity(after: &str) -> Option<usize> {
    let mut depth = 0usize;
    // Parentheses and brackets: a tuple's or an array's commas are not the list's.
    let mut nested = 0usize;
    let mut commas = 0;
    let mut prev = ' ';
    for c in after.chars() {
        match c {
            '<' => depth += 1,
            '>' if prev != '-' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(commas + 1);
                }
            }
            '(' | '[' => nested += 1,
            ')' | ']' => nested = nested.checked_sub(1)?,
            ',' if depth == 1 && nested == 0 => commas += 1,
            ';' | '{' | '}' if nested == 0 => return None,
            _ => {}
        }
        if !c.is_whitespace() {
            prev = c;
        }
    }
    None
}

/// Whether `code[at..]` starts the identifier `word` (not part of a longer identifier).
fn word_at(code: &str, at: usize, word: &str) -> bool {
    let is_ident = |c: char| c.is_alphanumeric() || c == '_';
    code[at..].starts_with(word)
        && !code[..at].chars().next_back().is_some_and(is_ident)
        && !code[at + word.len()..].chars().next().is_some_and(is_ident)
}

/// The rule's violations in one file's code (after [`code_only`]): (line, what, why).
fn violations(code: &str) -> Vec<(usize, String, &'static str)> {
    let line_of = |at: usize| code[..at].matches('\n').count() + 1;
    let mut found = Vec::new();
    for &(pattern, why) in FORBIDDEN {
        for (at, _) in code.match_indices(pattern) {
            let starts_word = pattern.starts_with('.')
                || !code[..at]
                    .chars()
                    .next_back()
                    .is_some_and(|c| c.is_alphanumeric() || c == '_');
            if starts_word {
                found.push((line_of(at), pattern.to_owned(), why));
            }
        }
    }
    // `HashMap<K, V>` / `HashSet<T>`: the default hasher, named as a type.
    for (ty, full) in [("HashMap", 3), ("HashSet", 2)] {
        for (at, _) in code.match_indices(ty) {
            if !word_at(code, at, ty) {
                continue;
            }
            let rest = code[at + ty.len()..].trim_start();
            let rest = rest.strip_prefix("::").map_or(rest, str::trim_start);
            if !rest.starts_with('<') {
                continue;
            }
            if generic_arity(rest).is_some_and(|n| n < full) {
                found.push((
                    line_of(at),
                    format!("{ty}<..> without a hasher"),
                    "the default hasher draws random keys",
                ));
            }
        }
    }
    // `use std::{fs, net::TcpStream, …}`.
    for (at, _) in code.match_indices("std::{") {
        let group = &code[at + "std::{".len()..];
        let mut depth = 1usize;
        let mut item = String::new();
        let mut items = Vec::new();
        for c in group.chars() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                ',' if depth == 1 => {
                    items.push(std::mem::take(&mut item));
                    continue;
                }
                _ => {}
            }
            if depth == 1 {
                item.push(c);
            }
        }
        items.push(item);
        for item in items {
            let first = item.trim().split("::").next().unwrap_or("").trim();
            if FORBIDDEN_STD_MODULES.contains(&first) {
                found.push((
                    line_of(at),
                    format!("std::{{{first}}}"),
                    "does I/O or starts a thread",
                ));
            }
        }
    }
    found.sort();
    found
}

fn rust_files(dir: &Path, files: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, files);
        } else if path.extension().is_some_and(|x| x == "rs") {
            files.push(path);
        }
    }
}

#[test]
fn core_src_has_no_clock_randomness_or_io() {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    assert!(
        files.iter().any(|f| f.ends_with("lib.rs")) && files.len() > 50,
        "found only {} files under {}",
        files.len(),
        src.display()
    );
    let mut report = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for (line, what, why) in violations(&code_only(&text)) {
            let shown = file.strip_prefix(&src).unwrap_or(file).display();
            report.push(format!("core/src/{shown}:{line}: {what} ({why})"));
        }
    }
    assert!(
        report.is_empty(),
        "core/src breaks the sans-IO rule:\n{}",
        report.join("\n")
    );
}

#[test]
fn comments_and_literals_do_not_count() {
    let text = r####"
        //! Never `Instant::now()`; see std::fs.
        /* a block /* nested: HashMap::new() */ still std::net */
        const A: &str = "std::process::Command and \" HashSet::new()";
        const B: &str = r#"thread_rng() "quoted" std::env"#;
        const C: &[u8] = br##"SystemTime::now()"##;
        const D: char = '"';
        fn f<'a>(x: &'a str) -> &'a str { x } // println!
        let r#type = 1;
    "####;
    let code = code_only(text);
    assert_eq!(code.lines().count(), text.lines().count());
    assert_eq!(violations(&code), Vec::new(), "{code}");
    assert!(code.contains("fn f<'a>(x: &'a str)"), "{code}");
    assert!(code.contains("let r#type = 1;"), "{code}");
}

#[test]
fn the_default_hasher_and_io_are_caught() {
    let caught = |text: &str| {
        violations(&code_only(text))
            .into_iter()
            .map(|(_, what, _)| what)
            .collect::<Vec<_>>()
    };
    assert_eq!(caught("let m = HashMap::new();"), ["HashMap::new"]);
    assert_eq!(
        caught("struct S { m: HashMap<String, Vec<(u8, u8)>> }"),
        ["HashMap<..> without a hasher"]
    );
    assert_eq!(
        caught("type M = HashMap<(u8, u8), [u8; 2]>;"),
        ["HashMap<..> without a hasher"]
    );
    assert_eq!(
        caught("let s = v.iter().collect::<HashSet<_>>();"),
        ["HashSet<..> without a hasher"]
    );
    assert_eq!(caught("let t = Instant::now();"), ["Instant::now"]);
    assert_eq!(caught("let d = start.elapsed();"), [".elapsed("]);
    assert_eq!(caught("use std::{fmt, fs::File};"), ["std::{fs}"]);
    assert_eq!(caught("std::thread::spawn(f);"), ["std::thread"]);
    assert_eq!(caught("eprintln!(\"x\");"), ["eprintln!"]);
    // A fixed hasher is allowed, and so are names that merely contain a pattern.
    assert!(caught("m: HashMap<u64, V, BuildHasherDefault<H>>, n: HashMap::default()").is_empty());
    assert!(caught("let s: HashSet<u8, Fixed> = HashSet::default();").is_empty());
    assert!(caught("fn my_thread_rng_free() {} use core::net::IpAddr; dbg_count!();").is_empty());
    assert!(caught("let x = format!(\"{}\", 1); let t = TimeInstant::nowhere;").is_empty());
}
