//! YAML, as a small tree whose every node keeps its line: saphyr-parser's events (no serde
//! layer, so every key and value keeps its line for messages), with anchors and aliases
//! expanded within a budget, one document, and a depth limit.

use std::collections::BTreeMap;

use saphyr_parser::{Event, Parser, ScalarStyle};

/// How deeply YAML collections may nest (the schema needs four levels).
pub(super) const MAX_DEPTH: usize = 16;

/// The most values a file may expand to, aliases included (a few aliases nested can stand for
/// billions of values).
pub(super) const MAX_NODES: usize = 100_000;

#[derive(Clone, Debug)]
pub(super) enum Value {
    Null,
    Scalar(String),
    Map(Vec<(String, usize, Node)>),
    Seq(Vec<Node>),
}

#[derive(Clone, Debug)]
pub(super) struct Node {
    pub(super) value: Value,
    pub(super) line: usize,
    /// How many values this node stands for, itself included.
    pub(super) size: usize,
}

/// A YAML problem at a line.
pub(super) struct YamlError {
    pub(super) line: usize,
    pub(super) message: String,
}

struct Reader<'a> {
    parser: Parser<'a, saphyr_parser::StrInput<'a>>,
    anchors: BTreeMap<usize, Node>,
    /// Values read so far, aliases expanded.
    total: usize,
}

impl<'a> Reader<'a> {
    fn next(&mut self) -> Result<(Event<'a>, usize), YamlError> {
        match self.parser.next_event() {
            Some(Ok((event, span))) => Ok((event, span.start.line())),
            Some(Err(e)) => Err(YamlError {
                line: e.marker().line(),
                message: format!("not valid YAML: {}", e.info()),
            }),
            None => Err(YamlError {
                line: 0,
                message: "not valid YAML: the file ends early".to_owned(),
            }),
        }
    }

    /// Counts `size` more values; too many is an error.
    fn count(&mut self, size: usize, line: usize) -> Result<(), YamlError> {
        self.total = self.total.saturating_add(size);
        if self.total > MAX_NODES {
            return Err(YamlError {
                line,
                message: format!(
                    "the file expands to more than {MAX_NODES} values (aliases included)"
                ),
            });
        }
        Ok(())
    }

    fn remember(&mut self, anchor: usize, node: &Node) {
        if anchor > 0 {
            self.anchors.insert(anchor, node.clone());
        }
    }

    fn node(&mut self, event: Event<'a>, line: usize, depth: usize) -> Result<Node, YamlError> {
        if depth > MAX_DEPTH {
            return Err(YamlError {
                line,
                message: format!("collections nest deeper than {MAX_DEPTH} levels"),
            });
        }
        match event {
            Event::Scalar(text, style, anchor, _) => {
                let null = style == ScalarStyle::Plain
                    && matches!(text.as_ref(), "" | "~" | "null" | "Null" | "NULL");
                let node = Node {
                    value: if null {
                        Value::Null
                    } else {
                        Value::Scalar(text.into_owned())
                    },
                    line,
                    size: 1,
                };
                self.count(1, line)?;
                self.remember(anchor, &node);
                Ok(node)
            }
            Event::SequenceStart(anchor, _) => {
                let mut items = Vec::new();
                loop {
                    let (event, at) = self.next()?;
                    if matches!(event, Event::SequenceEnd) {
                        break;
                    }
                    items.push(self.node(event, at, depth + 1)?);
                }
                let size = 1 + items.iter().map(|n| n.size).sum::<usize>();
                self.count(1, line)?;
                let node = Node {
                    value: Value::Seq(items),
                    line,
                    size,
                };
                self.remember(anchor, &node);
                Ok(node)
            }
            Event::MappingStart(anchor, _) => {
                let mut entries: Vec<(String, usize, Node)> = Vec::new();
                loop {
                    let (event, at) = self.next()?;
                    let key = match event {
                        Event::MappingEnd => break,
                        Event::Scalar(text, ..) => text.into_owned(),
                        _ => {
                            return Err(YamlError {
                                line: at,
                                message: "a mapping key must be a plain name".to_owned(),
                            })
                        }
                    };
                    if entries.iter().any(|(k, ..)| *k == key) {
                        return Err(YamlError {
                            line: at,
                            message: format!("key {key:?} appears twice in one mapping"),
                        });
                    }
                    let (event, value_line) = self.next()?;
                    let value = self.node(event, value_line, depth + 1)?;
                    entries.push((key, at, value));
                }
                let size = 1 + entries.iter().map(|(_, _, n)| n.size).sum::<usize>();
                self.count(1, line)?;
                let node = Node {
                    value: Value::Map(entries),
                    line,
                    size,
                };
                self.remember(anchor, &node);
                Ok(node)
            }
            Event::Alias(id) => {
                let size = self.anchors.get(&id).map(|n| n.size).ok_or(YamlError {
                    line,
                    message: "an alias names an anchor that is not defined before it".to_owned(),
                })?;
                // Counted before the copy: the budget bounds the memory aliases take.
                self.count(size, line)?;
                self.anchors.get(&id).cloned().ok_or(YamlError {
                    line,
                    message: "an alias names an anchor that is not defined before it".to_owned(),
                })
            }
            _ => Err(YamlError {
                line,
                message: "not valid YAML here".to_owned(),
            }),
        }
    }
}

/// Parses one YAML document (`None` for an empty file).
pub(super) fn parse_yaml(text: &str) -> Result<Option<Node>, YamlError> {
    let mut reader = Reader {
        parser: Parser::new_from_str(text),
        anchors: BTreeMap::new(),
        total: 0,
    };
    let mut root = None;
    loop {
        let (event, line) = reader.next()?;
        match event {
            Event::StreamStart | Event::DocumentEnd | Event::Nothing => {}
            Event::StreamEnd => return Ok(root),
            Event::DocumentStart(_) => {
                let (event, at) = reader.next()?;
                if root.is_some() {
                    // A trailing `---` with nothing after it is harmless; a second document
                    // with values would be ignored by the Go client, so it is refused here.
                    let empty = matches!(event, Event::DocumentEnd)
                        || matches!(&event, Event::Scalar(t, ScalarStyle::Plain, ..) if t.is_empty());
                    if empty {
                        continue;
                    }
                    return Err(YamlError {
                        line,
                        message: "the file holds more than one YAML document (the Go client reads \
                                  only the first: put everything in one)"
                            .to_owned(),
                    });
                }
                if matches!(event, Event::DocumentEnd) {
                    root = Some(Node {
                        value: Value::Null,
                        line: at,
                        size: 1,
                    });
                } else {
                    root = Some(reader.node(event, at, 0)?);
                }
            }
            _ => {
                return Err(YamlError {
                    line,
                    message: "not valid YAML here".to_owned(),
                })
            }
        }
    }
}
