//! The user's permission rules, written the way Claude Code's `permissions` lists are:
//! `mcp__<server>` (every tool of a server), `mcp__<server>__*` (the same, spelled with the
//! wildcard) and `mcp__<server>__<tool>` (one tool), in three lists `allow`, `ask` and `deny`.
//!
//! # Reading a rule
//!
//! After the prefix `mcp__`, the server id runs up to the first `__`; the rest is the tool's
//! name exactly as the server lists it in `tools/list`. So `mcp__github__create_issue` names
//! server `github`, tool `create_issue`, and `mcp__a__b__c` names server `a`, tool `b__c`. A
//! server whose id holds `__` therefore cannot be named by a rule; [`Rule::new`] refuses such
//! an id rather than build a rule that would read back as another.
//!
//! For a call, a rule naming a tool also matches when the model called the tool by
//! `<server>__<that name>` ([`Rule::matches_call`]): a rule written with the name the model
//! sees (Claude Code's rules are its exposed names with `mcp__` before them) still holds for a
//! tool whose own name the catalog had to map (`send.v2`, exposed as `srv__send_v2`). An
//! exposed name with the catalog's hash suffix matches only a rule that spells the suffix.
//!
//! `*` is accepted only as the whole tool part. Partial patterns (`mcp__github__create_*`), a
//! wildcard server (`mcp__*`) and argument patterns in parentheses are refused with a
//! [`RuleError`] naming the rule: a permission list that silently matched less than its
//! author meant would be worse than one that does not load.
//!
//! # Which rule wins
//!
//! Lists rank before specificity: deny beats ask, ask beats allow, whatever each names. A
//! server-wide `deny` cannot be punched through by a tool's `allow`, and a server-wide `ask`
//! keeps asking for a tool someone also allowed (as in Claude Code). Within one list every
//! match has the same effect, and the rule reported as the reason is the most specific one
//! (a named tool before a server-wide rule), then the first written. What an `allow` can and
//! cannot lift is the policy's business: see [`crate::host::consent`].
//!
//! # The `permissions` block
//!
//! [`Rules::from_permissions`] reads the block as a settings file holds it. Entries that are
//! not MCP rules at all (`Bash(npm test)`, `Read`, `WebFetch`: the host's other tools) are kept
//! aside in [`Rules::ignored`], not refused; an entry that starts with `mcp` in any case but not
//! with `mcp__` is a typo and is refused. One bad rule fails the whole block, with every bad
//! rule listed: dropping a bad `deny` and going on would allow what its author meant to deny.
//! Besides `allow`, `ask` and `deny`, the block may hold `billing` (an mcpwire addition): rules
//! naming tools whose calls spend money, which then always ask.

use std::fmt;

use serde_json::Value;

use crate::host::ServerId;

/// The prefix of every MCP permission rule.
pub const PREFIX: &str = "mcp__";

/// Which tools of its server a [`Rule`] names.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ToolPattern {
    /// Every tool: `mcp__<server>` or `mcp__<server>__*`.
    Any,
    /// The tool of this name (as the server lists it).
    Named(String),
}

/// One permission rule: a server, and all or one of its tools.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Rule {
    server: ServerId,
    tool: ToolPattern,
}

/// The list a rule is written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RuleList {
    /// `allow`: the call goes out without a prompt (within what the policy lets a rule lift).
    Allow,
    /// `ask`: the call always asks, even if the tool was approved "always".
    Ask,
    /// `deny`: the call is refused; nothing overrides it.
    Deny,
    /// `billing` (mcpwire's addition): the tool's calls spend money, so they always ask.
    Billing,
}

impl RuleList {
    /// The list's key in a `permissions` block.
    pub fn as_str(self) -> &'static str {
        match self {
            RuleList::Allow => "allow",
            RuleList::Ask => "ask",
            RuleList::Deny => "deny",
            RuleList::Billing => "billing",
        }
    }

    /// Every list, in the order a `permissions` block is read.
    pub const ALL: [RuleList; 4] = [
        RuleList::Allow,
        RuleList::Ask,
        RuleList::Deny,
        RuleList::Billing,
    ];
}

impl fmt::Display for RuleList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A string that is not a usable MCP permission rule.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{rule:?} is not a valid MCP permission rule: {kind}")]
pub struct RuleError {
    /// The rule as written.
    pub rule: String,
    /// What is wrong with it.
    pub kind: RuleErrorKind,
}

/// What is wrong with a rule string.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RuleErrorKind {
    /// It does not start with `mcp` at all: a rule for one of the host's other tools.
    #[error("it is not an MCP rule (those start with `mcp__`)")]
    NotMcp,
    /// It starts with `mcp` in some spelling, but not with exactly `mcp__`.
    #[error("MCP rules start with exactly `mcp__` (lower case, two underscores)")]
    Prefix,
    /// It holds whitespace or a control character (rules are not trimmed).
    #[error("it holds whitespace or a control character")]
    Whitespace,
    /// The server part is not a valid server id.
    #[error("the server part {server:?} is not a valid server id: {reason}")]
    Server {
        /// The server part as written.
        server: String,
        /// Why it is not an id.
        reason: &'static str,
    },
    /// `*` in the server part.
    #[error("`*` can stand for every tool of one server (`mcp__<server>__*`), not for servers")]
    ServerWildcard,
    /// `mcp__<server>__` with nothing after it.
    #[error("the tool part after `__` is empty")]
    EmptyTool,
    /// A `*` that is not the whole tool part.
    #[error(
        "`*` must be the whole tool part (`mcp__<server>__*`); partial patterns are not supported"
    )]
    PartialWildcard,
    /// Parentheses: an argument pattern, which MCP rules do not take.
    #[error("MCP rules take no argument pattern in parentheses")]
    ArgumentPattern,
    /// [`Rule::new`] for parts whose text would read back as another rule: a server id
    /// holding `__` (or ending with `_`, before a tool), or a tool named `*`.
    #[error("its text would read back as another rule (a server id holding `__`, or ending with `_` before a tool, or a tool named `*`)")]
    Unwritable,
}

impl Rule {
    /// Reads one rule string.
    pub fn parse(text: &str) -> Result<Rule, RuleError> {
        let bad = |kind| RuleError {
            rule: text.to_owned(),
            kind,
        };
        let Some(rest) = text.strip_prefix(PREFIX) else {
            let starts_mcp = text.get(..3).is_some_and(|p| p.eq_ignore_ascii_case("mcp"));
            return Err(bad(if starts_mcp {
                RuleErrorKind::Prefix
            } else {
                RuleErrorKind::NotMcp
            }));
        };
        if text.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(bad(RuleErrorKind::Whitespace));
        }
        if text.contains(['(', ')']) {
            return Err(bad(RuleErrorKind::ArgumentPattern));
        }
        let (server, tool) = match rest.split_once("__") {
            None => (rest, None),
            Some((server, tool)) => (server, Some(tool)),
        };
        if server.contains('*') {
            return Err(bad(RuleErrorKind::ServerWildcard));
        }
        let server = ServerId::new(server).map_err(|e| {
            bad(RuleErrorKind::Server {
                server: e.id,
                reason: e.reason,
            })
        })?;
        let tool = match tool {
            None | Some("*") => ToolPattern::Any,
            Some("") => return Err(bad(RuleErrorKind::EmptyTool)),
            Some(t) if t.contains('*') => return Err(bad(RuleErrorKind::PartialWildcard)),
            Some(t) => ToolPattern::Named(t.to_owned()),
        };
        Ok(Rule { server, tool })
    }

    /// A rule built from its parts, refused when its text would not read back as the same
    /// rule: a server id holding `__` (or ending with `_`, for a named tool), or a tool name
    /// that [`Rule::parse`] would refuse.
    pub fn new(server: ServerId, tool: ToolPattern) -> Result<Rule, RuleError> {
        let rule = Rule { server, tool };
        let text = rule.to_string();
        let ends_badly =
            matches!(rule.tool, ToolPattern::Named(_)) && rule.server.as_str().ends_with('_');
        if rule.server.as_str().contains("__") || ends_badly {
            return Err(RuleError {
                rule: text,
                kind: RuleErrorKind::Unwritable,
            });
        }
        match Rule::parse(&text) {
            Ok(back) if back == rule => Ok(rule),
            Ok(_) => Err(RuleError {
                rule: text,
                kind: RuleErrorKind::Unwritable,
            }),
            Err(e) => Err(e),
        }
    }

    /// The server the rule names.
    pub fn server(&self) -> &ServerId {
        &self.server
    }

    /// The tools of that server it names.
    pub fn tool(&self) -> &ToolPattern {
        &self.tool
    }

    /// Whether the rule names one tool (not every tool of its server).
    pub fn is_tool_specific(&self) -> bool {
        matches!(self.tool, ToolPattern::Named(_))
    }

    /// Whether the rule covers a call of the tool `tool` (the server's name for it) of
    /// `server` that the model made as `exposed`: as [`Rule::matches`], or, for a rule naming
    /// a tool, when `exposed` is `<server>__<that name>`. So a rule written with the name the
    /// model sees (`mcp__srv__send_v2` for a tool the catalog shows as `srv__send_v2` because
    /// its own name, `send.v2`, breaks the providers' rule) covers that tool too, and no
    /// other: an exposed name routes to one tool only.
    pub fn matches_call(&self, server: &ServerId, tool: &str, exposed: &str) -> bool {
        if self.matches(server, tool) {
            return true;
        }
        match &self.tool {
            ToolPattern::Named(t) => {
                self.server == *server
                    && exposed
                        .strip_prefix(server.as_str())
                        .and_then(|rest| rest.strip_prefix("__"))
                        == Some(t.as_str())
            }
            ToolPattern::Any => false,
        }
    }

    /// Whether the rule covers the tool `tool` (the server's name for it) of `server`.
    pub fn matches(&self, server: &ServerId, tool: &str) -> bool {
        self.server == *server
            && match &self.tool {
                ToolPattern::Any => true,
                ToolPattern::Named(name) => name == tool,
            }
    }
}

/// The rule's text: `mcp__<server>` for every tool, `mcp__<server>__<tool>` for one.
impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{PREFIX}{}", self.server)?;
        match &self.tool {
            ToolPattern::Any => Ok(()),
            ToolPattern::Named(t) => write!(f, "__{t}"),
        }
    }
}

impl std::str::FromStr for Rule {
    type Err = RuleError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Rule::parse(s)
    }
}

impl serde::Serialize for Rule {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// One bad entry of a rule list, with where it is.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("permissions.{list}[{index}]: {error}")]
pub struct ListedRuleError {
    /// The list it is in.
    pub list: RuleList,
    /// Its index in that list.
    pub index: usize,
    /// What is wrong with it.
    pub error: RuleError,
}

/// Why a set of rule lists (or a `permissions` block) was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RulesError {
    /// The `permissions` block is not a JSON object.
    #[error("the permissions block must be a JSON object")]
    NotAnObject,
    /// A list is not an array.
    #[error("permissions.{list} must be an array of rule strings")]
    NotAList {
        /// The list.
        list: RuleList,
    },
    /// A list entry is not a string.
    #[error("permissions.{list}[{index}] must be a string")]
    NotAString {
        /// The list.
        list: RuleList,
        /// The entry's index.
        index: usize,
    },
    /// Entries that are not valid rules, all of them, in list order.
    #[error("{}", show_all(.0))]
    BadRules(Vec<ListedRuleError>),
}

fn show_all(errors: &[ListedRuleError]) -> String {
    let lines: Vec<String> = errors.iter().map(ToString::to_string).collect();
    lines.join("; ")
}

/// The user's rules: the `allow`, `ask`, `deny` and `billing` lists, in the order written.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rules {
    allow: Vec<Rule>,
    ask: Vec<Rule>,
    deny: Vec<Rule>,
    billing: Vec<Rule>,
    ignored: Vec<String>,
}

impl Rules {
    /// No rules: the policy's defaults decide everything.
    pub fn new() -> Rules {
        Rules::default()
    }

    /// Reads the three lists as a settings file holds them (entries that are not MCP rules
    /// are kept in [`Rules::ignored`]).
    pub fn from_lists<A, B, C>(allow: A, ask: B, deny: C) -> Result<Rules, RulesError>
    where
        A: IntoIterator,
        A::Item: AsRef<str>,
        B: IntoIterator,
        B::Item: AsRef<str>,
        C: IntoIterator,
        C::Item: AsRef<str>,
    {
        let mut rules = Rules::new();
        let mut errors = Vec::new();
        rules.read_list(RuleList::Allow, allow, &mut errors);
        rules.read_list(RuleList::Ask, ask, &mut errors);
        rules.read_list(RuleList::Deny, deny, &mut errors);
        if errors.is_empty() {
            Ok(rules)
        } else {
            Err(RulesError::BadRules(errors))
        }
    }

    /// Reads a `permissions` block (`{"allow": [..], "ask": [..], "deny": [..]}`, and
    /// optionally `billing`); other members (`defaultMode`, `additionalDirectories`, ...) are
    /// not this module's and are skipped. An absent list is empty.
    pub fn from_permissions(block: &Value) -> Result<Rules, RulesError> {
        let object = block.as_object().ok_or(RulesError::NotAnObject)?;
        let mut rules = Rules::new();
        let mut errors = Vec::new();
        for list in RuleList::ALL {
            let Some(entries) = object.get(list.as_str()) else {
                continue;
            };
            let entries = entries.as_array().ok_or(RulesError::NotAList { list })?;
            let mut texts = Vec::with_capacity(entries.len());
            for (index, entry) in entries.iter().enumerate() {
                texts.push(
                    entry
                        .as_str()
                        .ok_or(RulesError::NotAString { list, index })?,
                );
            }
            rules.read_list(list, texts, &mut errors);
        }
        if errors.is_empty() {
            Ok(rules)
        } else {
            Err(RulesError::BadRules(errors))
        }
    }

    /// These rules with `billing` tags added (tools whose calls spend money: they always ask,
    /// and only an `allow` naming the tool itself lets them through).
    pub fn with_billing<I>(mut self, billing: I) -> Result<Rules, RulesError>
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        let mut errors = Vec::new();
        self.read_list(RuleList::Billing, billing, &mut errors);
        if errors.is_empty() {
            Ok(self)
        } else {
            Err(RulesError::BadRules(errors))
        }
    }

    fn read_list<I>(&mut self, list: RuleList, entries: I, errors: &mut Vec<ListedRuleError>)
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        for (index, text) in entries.into_iter().enumerate() {
            match Rule::parse(text.as_ref()) {
                Ok(rule) => self.push(list, rule),
                Err(RuleError {
                    rule,
                    kind: RuleErrorKind::NotMcp,
                }) => self.ignored.push(rule),
                Err(error) => errors.push(ListedRuleError { list, index, error }),
            }
        }
    }

    /// Adds a rule at the end of a list.
    pub fn push(&mut self, list: RuleList, rule: Rule) {
        self.list_mut(list).push(rule);
    }

    /// The rules of one list, in the order written.
    pub fn list(&self, list: RuleList) -> &[Rule] {
        match list {
            RuleList::Allow => &self.allow,
            RuleList::Ask => &self.ask,
            RuleList::Deny => &self.deny,
            RuleList::Billing => &self.billing,
        }
    }

    fn list_mut(&mut self, list: RuleList) -> &mut Vec<Rule> {
        match list {
            RuleList::Allow => &mut self.allow,
            RuleList::Ask => &mut self.ask,
            RuleList::Deny => &mut self.deny,
            RuleList::Billing => &mut self.billing,
        }
    }

    /// The entries that were not MCP rules (the host's other tools), as written, in the
    /// order read.
    pub fn ignored(&self) -> &[String] {
        &self.ignored
    }

    /// Whether no list holds a rule.
    pub fn is_empty(&self) -> bool {
        RuleList::ALL.iter().all(|&l| self.list(l).is_empty())
    }

    /// The rule of `list` reported for the tool `tool` of `server`: the most specific match
    /// (a rule naming the tool before a server-wide one), then the first written.
    pub fn find(&self, list: RuleList, server: &ServerId, tool: &str) -> Option<&Rule> {
        self.find_call(list, server, tool, None)
    }

    /// The rule of `list` naming the tool itself (not server-wide), if any: the first written.
    pub fn find_specific(&self, list: RuleList, server: &ServerId, tool: &str) -> Option<&Rule> {
        self.find_specific_call(list, server, tool, None)
    }

    /// [`Rules::find`] for a call, where a rule naming the tool also matches by the exposed
    /// name the model called ([`Rule::matches_call`]).
    pub fn find_call(
        &self,
        list: RuleList,
        server: &ServerId,
        tool: &str,
        exposed: Option<&str>,
    ) -> Option<&Rule> {
        self.find_specific_call(list, server, tool, exposed)
            .or_else(|| self.list(list).iter().find(|r| r.matches(server, tool)))
    }

    /// [`Rules::find_specific`] for a call (see [`Rules::find_call`]).
    pub fn find_specific_call(
        &self,
        list: RuleList,
        server: &ServerId,
        tool: &str,
        exposed: Option<&str>,
    ) -> Option<&Rule> {
        self.list(list).iter().find(|r| {
            r.is_tool_specific()
                && match exposed {
                    Some(e) => r.matches_call(server, tool, e),
                    None => r.matches(server, tool),
                }
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn id(s: &str) -> ServerId {
        ServerId::new(s).unwrap()
    }

    fn kind(text: &str) -> RuleErrorKind {
        Rule::parse(text).unwrap_err().kind
    }

    #[test]
    fn the_three_shapes_parse() {
        let r = Rule::parse("mcp__github").unwrap();
        assert_eq!(
            (r.server().as_str(), r.tool()),
            ("github", &ToolPattern::Any)
        );
        let r = Rule::parse("mcp__github__*").unwrap();
        assert_eq!(r.tool(), &ToolPattern::Any);
        let r = Rule::parse("mcp__github__create_issue").unwrap();
        assert_eq!(r.tool(), &ToolPattern::Named("create_issue".into()));
        // The server part ends at the first `__`.
        let r = Rule::parse("mcp__a__b__c").unwrap();
        assert_eq!(
            (r.server().as_str(), r.tool()),
            ("a", &ToolPattern::Named("b__c".into()))
        );
        let r = Rule::parse("mcp__my-server_2__x.y").unwrap();
        assert_eq!(r.server().as_str(), "my-server_2");
    }

    #[test]
    fn bad_rules_say_what_is_wrong_and_name_the_rule() {
        assert_eq!(kind("Bash(npm test)"), RuleErrorKind::NotMcp);
        assert_eq!(kind("Read"), RuleErrorKind::NotMcp);
        assert_eq!(kind(""), RuleErrorKind::NotMcp);
        assert_eq!(kind("mcp_github"), RuleErrorKind::Prefix);
        assert_eq!(kind("MCP__github"), RuleErrorKind::Prefix);
        assert_eq!(kind("mcp"), RuleErrorKind::Prefix);
        assert_eq!(kind("mcp__git hub"), RuleErrorKind::Whitespace);
        assert_eq!(kind(" mcp__github"), RuleErrorKind::NotMcp);
        assert_eq!(kind("mcp__github "), RuleErrorKind::Whitespace);
        assert_eq!(kind("mcp__github__a\tb"), RuleErrorKind::Whitespace);
        assert_eq!(kind("mcp__*"), RuleErrorKind::ServerWildcard);
        assert_eq!(kind("mcp__*__x"), RuleErrorKind::ServerWildcard);
        assert_eq!(kind("mcp__github__"), RuleErrorKind::EmptyTool);
        assert_eq!(
            kind("mcp__github__create_*"),
            RuleErrorKind::PartialWildcard
        );
        assert_eq!(kind("mcp__github__**"), RuleErrorKind::PartialWildcard);
        assert_eq!(kind("mcp__github__run(ls)"), RuleErrorKind::ArgumentPattern);
        assert!(matches!(kind("mcp__"), RuleErrorKind::Server { .. }));
        assert!(matches!(kind("mcp__9x__t"), RuleErrorKind::Server { .. }));
        assert!(matches!(kind("mcp__a.b"), RuleErrorKind::Server { .. }));
        let e = Rule::parse("mcp__github__create_*").unwrap_err();
        assert!(e.to_string().contains("\"mcp__github__create_*\""), "{e}");
    }

    #[test]
    fn display_gives_the_text_back() {
        for text in [
            "mcp__github",
            "mcp__github__create_issue",
            "mcp__a__b__c",
            "mcp__a___b",
        ] {
            assert_eq!(Rule::parse(text).unwrap().to_string(), text);
        }
        // The wildcard and the bare server are the same rule; it is written the short way.
        assert_eq!(
            Rule::parse("mcp__github__*").unwrap().to_string(),
            "mcp__github"
        );
    }

    #[test]
    fn new_refuses_rules_that_would_read_back_as_another() {
        assert_eq!(
            Rule::new(id("a__b"), ToolPattern::Any).unwrap_err().kind,
            RuleErrorKind::Unwritable
        );
        assert_eq!(
            Rule::new(id("a_"), ToolPattern::Named("t".into()))
                .unwrap_err()
                .kind,
            RuleErrorKind::Unwritable
        );
        assert!(Rule::new(id("a_"), ToolPattern::Any).is_ok());
        assert_eq!(
            Rule::new(id("a"), ToolPattern::Named("x y".into()))
                .unwrap_err()
                .kind,
            RuleErrorKind::Whitespace
        );
        assert_eq!(
            Rule::new(id("a"), ToolPattern::Named("*".into()))
                .unwrap_err()
                .kind,
            RuleErrorKind::Unwritable
        );
        let r = Rule::new(id("gh"), ToolPattern::Named("t".into())).unwrap();
        assert_eq!(Rule::parse(&r.to_string()).unwrap(), r);
    }

    #[test]
    fn matching_is_by_server_and_exact_tool_name() {
        let gh = id("github");
        let all = Rule::parse("mcp__github").unwrap();
        let one = Rule::parse("mcp__github__create_issue").unwrap();
        assert!(all.matches(&gh, "anything"));
        assert!(one.matches(&gh, "create_issue"));
        assert!(!one.matches(&gh, "create_issues"));
        assert!(!one.matches(&gh, "Create_Issue"));
        assert!(!all.matches(&id("gitlab"), "create_issue"));
        assert!(!Rule::parse("mcp__git").unwrap().matches(&gh, "x"));
    }

    #[test]
    fn a_rule_naming_a_tool_also_matches_the_name_the_model_sees() {
        let srv = id("srv");
        let r = Rule::parse("mcp__srv__send_v2").unwrap();
        assert!(!r.matches(&srv, "send.v2"));
        assert!(r.matches_call(&srv, "send.v2", "srv__send_v2"));
        assert!(!r.matches_call(&srv, "send.v2", "srv__send_v2_1a2b"));
        assert!(!r.matches_call(&id("other"), "send.v2", "srv__send_v2"));
        assert!(!r.matches_call(&srv, "x", "srvx__send_v2"));
        let rules = Rules::from_lists([""; 0], [""; 0], ["mcp__srv__send_v2"]).unwrap();
        assert!(rules.find(RuleList::Deny, &srv, "send.v2").is_none());
        assert!(rules
            .find_call(RuleList::Deny, &srv, "send.v2", Some("srv__send_v2"))
            .is_some());
    }

    #[test]
    fn find_prefers_the_rule_naming_the_tool_then_the_first_written() {
        let rules = Rules::from_lists(
            [
                "mcp__github",
                "mcp__github__*",
                "mcp__github__search",
                "mcp__github__search",
            ],
            [""; 0],
            [""; 0],
        )
        .unwrap();
        let gh = id("github");
        let found = rules.find(RuleList::Allow, &gh, "search").unwrap();
        assert_eq!(found.to_string(), "mcp__github__search");
        assert!(std::ptr::eq(found, &rules.list(RuleList::Allow)[2]));
        let found = rules.find(RuleList::Allow, &gh, "other").unwrap();
        assert!(std::ptr::eq(found, &rules.list(RuleList::Allow)[0]));
        assert!(rules.find(RuleList::Deny, &gh, "search").is_none());
        assert!(rules.find_specific(RuleList::Allow, &gh, "other").is_none());
    }

    #[test]
    fn lists_collect_every_bad_rule_and_skip_other_tools_rules() {
        let err = Rules::from_lists(
            ["Bash(npm test)", "mcp__ok", "mcp_typo"],
            ["WebFetch"],
            ["mcp__x__a*", "mcp__fine__t"],
        )
        .unwrap_err();
        let RulesError::BadRules(errors) = &err else {
            panic!("{err:?}")
        };
        let at: Vec<(RuleList, usize)> = errors.iter().map(|e| (e.list, e.index)).collect();
        assert_eq!(at, [(RuleList::Allow, 2), (RuleList::Deny, 0)]);
        let text = err.to_string();
        assert!(
            text.contains("permissions.allow[2]: \"mcp_typo\""),
            "{text}"
        );
        assert!(
            text.contains("permissions.deny[0]: \"mcp__x__a*\""),
            "{text}"
        );

        let ok = Rules::from_lists(["Bash(npm test)", "mcp__ok"], ["WebFetch"], [""; 0]).unwrap();
        assert_eq!(ok.ignored(), ["Bash(npm test)", "WebFetch"]);
        assert_eq!(ok.list(RuleList::Allow).len(), 1);
    }

    #[test]
    fn permissions_blocks_are_read_as_settings_files_hold_them() {
        let block = json!({
            "allow": ["mcp__github__search", "Bash(ls)"],
            "deny": ["mcp__shell"],
            "billing": ["mcp__stripe__*"],
            "defaultMode": "acceptEdits",
            "additionalDirectories": ["../x"]
        });
        let rules = Rules::from_permissions(&block).unwrap();
        assert_eq!(rules.list(RuleList::Allow).len(), 1);
        assert_eq!(rules.list(RuleList::Ask).len(), 0);
        assert_eq!(rules.list(RuleList::Deny)[0].to_string(), "mcp__shell");
        assert_eq!(rules.list(RuleList::Billing)[0].to_string(), "mcp__stripe");
        assert_eq!(rules.ignored(), ["Bash(ls)"]);

        assert_eq!(
            Rules::from_permissions(&json!([])),
            Err(RulesError::NotAnObject)
        );
        assert_eq!(
            Rules::from_permissions(&json!({"deny": "mcp__x"})),
            Err(RulesError::NotAList {
                list: RuleList::Deny
            })
        );
        assert_eq!(
            Rules::from_permissions(&json!({"ask": ["mcp__x", 3]})),
            Err(RulesError::NotAString {
                list: RuleList::Ask,
                index: 1
            })
        );
        assert!(Rules::from_permissions(&json!({})).unwrap().is_empty());
    }

    #[test]
    fn with_billing_adds_tags_and_refuses_bad_ones() {
        let rules = Rules::new().with_billing(["mcp__stripe"]).unwrap();
        assert!(rules
            .find(RuleList::Billing, &id("stripe"), "charge")
            .is_some());
        assert!(Rules::new().with_billing(["mcp__stripe__pay*"]).is_err());
    }
}
