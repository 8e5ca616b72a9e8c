//! Exposed names: what the model calls a server's tool.
//!
//! The model providers take tool names matching `^[a-zA-Z0-9_-]{1,64}$`, and a tool name is
//! unique only within its server. A tool `T` of server `S` is exposed as follows.
//!
//! 1. Its **candidate** is `S__T'`, where `T'` is `T` with every character outside
//!    `[a-zA-Z0-9_-]` replaced by `_` (one `_` per character, so `fs.read` and `fs/read` both
//!    give `fs_read`). Server ids already fit the rule.
//! 2. If no other tool in the catalog has the same candidate and it is at most 64 bytes long,
//!    the candidate is the name.
//! 3. Otherwise (shortened, or shared: **every** tool sharing a candidate gets a suffix, not
//!    all but one) the name is the candidate's first 55 bytes, `_`, and 8 lowercase hex digits
//!    of the SHA-256 of the tool's identity: its server id and its original name, as sent,
//!    with a salt of 0 ([`suffixed`]). Two different tools get different suffixes unless their
//!    32-bit digests collide.
//! 4. If a name from step 2 or 3 is still wanted by more than one tool (a digest collision,
//!    or a tool whose plain name happens to look like another's suffixed one), a tool that has
//!    its plain candidate keeps it, and every other claimant, taken in the order of (server
//!    id, tool name), takes the suffix with the next salt (1, 2, …) that no tool claims at
//!    step 2 or 3 and no earlier claimant took here.
//!
//! The result depends only on the set of (server, tool) pairs in the catalog, never on the
//! order servers were added or tools listed. It can change for a tool only when:
//! - a tool with the same candidate appears (both get suffixes) or the last other one goes
//!   (the suffix is dropped). Within one server that takes two names that differ only in
//!   characters outside the rule (`a.b` and `a_b`); across servers it takes an id ending the
//!   way another's tool begins (server `a` with tool `b__c` and server `a__b` with tool `c`);
//! - step 4 applies to it, which takes a 32-bit digest collision or a tool name built to
//!   look like a suffix.
//!
//! Adding a server whose tools share no candidate with the others renames nothing else.
//!
//! An exposed name is never parsed back: the catalog keeps the map from each name to its
//! (server, tool). The meta-tools' names (`search_tools`, `call_tool`) never clash with an
//! exposed name: every exposed name holds `__` or is 64 bytes long.

use std::collections::{BTreeMap, BTreeSet};

use sha2::{Digest, Sha256};

use crate::host::ServerId;

/// The longest name the providers take.
pub const MAX_NAME_LEN: usize = 64;
/// Between the server id and the tool name.
pub const SEPARATOR: &str = "__";
/// Hex digits of a suffix.
pub const SUFFIX_HEX_DIGITS: usize = 8;
/// The longest a candidate's part before a suffix may be (`64 - 1 - 8`).
pub const SUFFIX_PREFIX_LEN: usize = MAX_NAME_LEN - 1 - SUFFIX_HEX_DIGITS;

/// Whether `name` matches the providers' rule `^[a-zA-Z0-9_-]{1,64}$`.
pub fn is_valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Step 1: `server__tool` with every character outside `[a-zA-Z0-9_-]` replaced by `_`, not
/// shortened.
pub fn candidate(server: &ServerId, tool: &str) -> String {
    let mut out = String::with_capacity(server.as_str().len() + SEPARATOR.len() + tool.len());
    out.push_str(server.as_str());
    out.push_str(SEPARATOR);
    out.extend(tool.chars().map(|c| {
        if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
            c
        } else {
            '_'
        }
    }));
    out
}

/// Step 3: the candidate's first [`SUFFIX_PREFIX_LEN`] bytes, `_` and 8 hex digits of
/// SHA-256(salt as 4 bytes little-endian ‖ the server id's length as 8 bytes little-endian ‖
/// the server id ‖ the tool's name).
pub fn suffixed(candidate: &str, server: &ServerId, tool: &str, salt: u32) -> String {
    let mut hash = Sha256::new();
    hash.update(salt.to_le_bytes());
    hash.update((server.as_str().len() as u64).to_le_bytes());
    hash.update(server.as_str().as_bytes());
    hash.update(tool.as_bytes());
    let digest = hash.finalize();
    // Candidates are ASCII: any byte index is a character boundary.
    let prefix = candidate.get(..SUFFIX_PREFIX_LEN).unwrap_or(candidate);
    let mut out = String::with_capacity(MAX_NAME_LEN);
    out.push_str(prefix);
    out.push('_');
    out.push_str(&crate::host::lower_hex(&digest[..SUFFIX_HEX_DIGITS / 2]));
    out
}

/// One tool's identity: its server and its name as the server sent it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct ToolKey {
    pub(crate) server: ServerId,
    pub(crate) tool: String,
}

/// A tool's name as steps 1–3 give it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Proposal {
    candidate: String,
    /// 0: the plain candidate; `n > 0`: the suffix with salt `n - 1`.
    level: u32,
    name: String,
}

/// A change of one tool's exposed name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Renamed {
    pub(crate) key: ToolKey,
    pub(crate) old: Option<String>,
    pub(crate) new: Option<String>,
}

/// The exposed names of every tool in the catalog, kept up to date one server at a time.
#[derive(Clone, Debug, Default)]
pub(crate) struct Names {
    /// Step 1: candidate → the tools that have it.
    groups: BTreeMap<String, BTreeSet<ToolKey>>,
    /// Steps 2–3, per tool.
    proposals: BTreeMap<ToolKey, Proposal>,
    /// Proposed name → the tools proposing it.
    claims: BTreeMap<String, BTreeSet<ToolKey>>,
    /// Proposed names wanted by two tools or more.
    contested: BTreeSet<String>,
    /// Step 4's names.
    fallbacks: BTreeMap<ToolKey, String>,
    /// Exposed name → tool.
    routes: BTreeMap<String, ToolKey>,
}

impl Names {
    /// The tool an exposed name stands for.
    pub(crate) fn route(&self, exposed: &str) -> Option<&ToolKey> {
        self.routes.get(exposed)
    }

    /// How many tools are named.
    pub(crate) fn len(&self) -> usize {
        self.routes.len()
    }

    /// A tool's exposed name.
    pub(crate) fn exposed(&self, key: &ToolKey) -> Option<&str> {
        if let Some(name) = self.fallbacks.get(key) {
            return Some(name);
        }
        self.proposals.get(key).map(|p| p.name.as_str())
    }

    /// Replaces server `server`'s tools `old` (names as sent, as last given here) with `new`
    /// (unique names). Returns every tool whose exposed name changed, appeared or went, in
    /// (server, tool) order.
    pub(crate) fn replace(
        &mut self,
        server: &ServerId,
        old: &[String],
        new: &[String],
    ) -> Vec<Renamed> {
        let key = |tool: &String| ToolKey {
            server: server.clone(),
            tool: tool.clone(),
        };
        let old_keys: Vec<ToolKey> = old.iter().map(key).collect();
        let new_keys: Vec<ToolKey> = new.iter().map(key).collect();

        // The candidates whose groups change, and the exposed names of everyone who may be
        // renamed, before any change.
        let mut touched: BTreeSet<String> = BTreeSet::new();
        for k in &old_keys {
            if let Some(p) = self.proposals.get(k) {
                touched.insert(p.candidate.clone());
            }
        }
        for k in &new_keys {
            touched.insert(candidate(&k.server, &k.tool));
        }
        let mut before: BTreeMap<ToolKey, Option<String>> = BTreeMap::new();
        let remember = |names: &Names, k: &ToolKey, before: &mut BTreeMap<_, _>| {
            if !before.contains_key(k) {
                before.insert(k.clone(), names.exposed(k).map(str::to_owned));
            }
        };
        for c in &touched {
            if let Some(members) = self.groups.get(c) {
                for k in members {
                    remember(self, k, &mut before);
                }
            }
        }
        for k in old_keys.iter().chain(&new_keys) {
            remember(self, k, &mut before);
        }
        for k in self.fallbacks.keys() {
            remember(self, k, &mut before);
        }

        // Steps 1–3 for the touched groups.
        for k in &old_keys {
            if let Some(p) = self.proposals.remove(k) {
                self.unclaim(&p.name, k);
                if let Some(members) = self.groups.get_mut(&p.candidate) {
                    members.remove(k);
                    if members.is_empty() {
                        self.groups.remove(&p.candidate);
                    }
                }
            }
        }
        for k in &new_keys {
            self.groups
                .entry(candidate(&k.server, &k.tool))
                .or_default()
                .insert(k.clone());
        }
        for c in &touched {
            let Some(members) = self.groups.get(c) else {
                continue;
            };
            let shared = members.len() > 1;
            let members: Vec<ToolKey> = members.iter().cloned().collect();
            for k in members {
                let proposal = propose(c, &k, shared);
                match self.proposals.get(&k) {
                    Some(p) if *p == proposal => continue,
                    Some(p) => {
                        let name = p.name.clone();
                        self.unclaim(&name, &k);
                    }
                    None => {}
                }
                self.claim(&proposal.name, &k);
                self.proposals.insert(k, proposal);
            }
        }

        // Step 4, over every contested name (there are none unless digests collide or a name
        // imitates a suffix).
        self.fallbacks = self.resolve_contested();
        for k in self.fallbacks.keys() {
            if !before.contains_key(k) {
                // Not touched, not a fallback before: its name was its (unchanged) proposal.
                let name = self.proposals.get(k).map(|p| p.name.clone());
                before.insert(k.clone(), name);
            }
        }

        let mut changes = Vec::new();
        for (k, old) in before {
            let new = self.exposed(&k).map(str::to_owned);
            if old != new {
                changes.push(Renamed { key: k, old, new });
            }
        }
        for c in &changes {
            if let Some(old) = &c.old {
                if self.routes.get(old) == Some(&c.key) {
                    self.routes.remove(old);
                }
            }
        }
        for c in &changes {
            if let Some(new) = &c.new {
                self.routes.insert(new.clone(), c.key.clone());
            }
        }
        changes
    }

    fn claim(&mut self, name: &str, key: &ToolKey) {
        let claimants = self.claims.entry(name.to_owned()).or_default();
        claimants.insert(key.clone());
        if claimants.len() > 1 {
            self.contested.insert(name.to_owned());
        }
    }

    fn unclaim(&mut self, name: &str, key: &ToolKey) {
        if let Some(claimants) = self.claims.get_mut(name) {
            claimants.remove(key);
            match claimants.len() {
                0 => {
                    self.claims.remove(name);
                    self.contested.remove(name);
                }
                1 => {
                    self.contested.remove(name);
                }
                _ => {}
            }
        }
    }

    /// Step 4.
    fn resolve_contested(&self) -> BTreeMap<ToolKey, String> {
        let mut losers: BTreeSet<&ToolKey> = BTreeSet::new();
        for name in &self.contested {
            let Some(claimants) = self.claims.get(name) else {
                continue;
            };
            let plain: Vec<&ToolKey> = claimants
                .iter()
                .filter(|k| self.proposals.get(*k).is_some_and(|p| p.level == 0))
                .collect();
            for k in claimants {
                if !(plain.len() == 1 && plain[0] == k) {
                    losers.insert(k);
                }
            }
        }
        let mut taken: BTreeSet<String> = BTreeSet::new();
        let mut out = BTreeMap::new();
        for k in losers {
            let Some(p) = self.proposals.get(k) else {
                continue;
            };
            // Each salt gives an independent 32-bit digest, and at most as many names are
            // taken as there are tools: the loop ends after a few salts at most.
            for salt in p.level.. {
                let name = suffixed(&p.candidate, &k.server, &k.tool, salt);
                if !self.claims.contains_key(&name) && !taken.contains(&name) {
                    taken.insert(name.clone());
                    out.insert(k.clone(), name);
                    break;
                }
            }
        }
        out
    }
}

/// Steps 2–3 for one tool.
fn propose(candidate: &str, key: &ToolKey, shared: bool) -> Proposal {
    if !shared && candidate.len() <= MAX_NAME_LEN {
        Proposal {
            candidate: candidate.to_owned(),
            level: 0,
            name: candidate.to_owned(),
        }
    } else {
        Proposal {
            candidate: candidate.to_owned(),
            level: 1,
            name: suffixed(candidate, &key.server, &key.tool, 0),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn id(s: &str) -> ServerId {
        ServerId::new(s).unwrap()
    }

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    fn name_of(names: &Names, server: &str, tool: &str) -> String {
        names
            .exposed(&ToolKey {
                server: id(server),
                tool: tool.to_owned(),
            })
            .unwrap()
            .to_owned()
    }

    #[test]
    fn candidates_map_characters_outside_the_rule() {
        assert_eq!(candidate(&id("gh"), "create_issue"), "gh__create_issue");
        assert_eq!(candidate(&id("fs"), "read.file/v2"), "fs__read_file_v2");
        assert_eq!(candidate(&id("x"), "ünï côde"), "x___n__c_de");
        assert_eq!(candidate(&id("x"), "🦀"), "x___");
        assert_eq!(candidate(&id("x"), ""), "x__");
    }

    #[test]
    fn suffixes_are_stable_and_fit() {
        let s = suffixed("gh__create_issue", &id("gh"), "create_issue", 0);
        // Fixed bytes: the digest is part of the name contract (checked against Python's hashlib:
        // sha256(pack("<I", 0) + pack("<Q", 2) + b"gh" + b"create_issue")).
        assert_eq!(s, "gh__create_issue_34a6ee49");
        assert!(is_valid_name(&s));
        assert_ne!(
            s,
            suffixed("gh__create_issue", &id("gh"), "create_issue", 1)
        );
        assert_ne!(
            s,
            suffixed("gh__create_issue", &id("gh"), "create.issue", 0)
        );
        let long = candidate(&id("server"), &"x".repeat(100));
        let short = suffixed(&long, &id("server"), &"x".repeat(100), 0);
        assert_eq!(short.len(), MAX_NAME_LEN);
        assert!(short.starts_with(&long[..SUFFIX_PREFIX_LEN]));
        assert!(is_valid_name(&short));
    }

    #[test]
    fn the_server_id_and_tool_are_hashed_apart() {
        // Same concatenation, different split: different digests.
        let a = suffixed("c", &id("ab"), "c", 0);
        let b = suffixed("c", &id("a"), "bc", 0);
        assert_ne!(a, b);
    }

    #[test]
    fn every_tool_sharing_a_candidate_gets_a_suffix() {
        let mut names = Names::default();
        names.replace(&id("fs"), &[], &strings(&["a.b", "a_b", "c"]));
        let ab1 = name_of(&names, "fs", "a.b");
        let ab2 = name_of(&names, "fs", "a_b");
        assert_ne!(ab1, ab2);
        assert!(ab1.starts_with("fs__a_b_") && ab2.starts_with("fs__a_b_"));
        assert_eq!(name_of(&names, "fs", "c"), "fs__c");
        // The other goes: the suffix is dropped.
        let changes = names.replace(
            &id("fs"),
            &strings(&["a.b", "a_b", "c"]),
            &strings(&["a_b", "c"]),
        );
        assert_eq!(name_of(&names, "fs", "a_b"), "fs__a_b");
        assert_eq!(changes.len(), 2, "{changes:?}");
        assert_eq!(names.route("fs__a_b").unwrap().tool, "a_b");
        assert!(names.route(&ab1).is_none() && names.route(&ab2).is_none());
    }

    #[test]
    fn candidates_collide_across_servers() {
        let mut names = Names::default();
        names.replace(&id("a"), &[], &strings(&["b__c", "d"]));
        assert_eq!(name_of(&names, "a", "b__c"), "a__b__c");
        let changes = names.replace(&id("a__b"), &[], &strings(&["c"]));
        let one = name_of(&names, "a", "b__c");
        let two = name_of(&names, "a__b", "c");
        assert!(one != two && one.starts_with("a__b__c_") && two.starts_with("a__b__c_"));
        // a__d did not move.
        assert_eq!(name_of(&names, "a", "d"), "a__d");
        assert_eq!(changes.len(), 2);
        assert_eq!(names.route(&one).unwrap().server, id("a"));
        assert_eq!(names.route(&two).unwrap().server, id("a__b"));
    }

    #[test]
    fn a_name_that_imitates_a_suffix_keeps_it_and_the_other_moves_on() {
        let mut names = Names::default();
        names.replace(&id("fs"), &[], &strings(&["a.b", "a_b"]));
        let taken = name_of(&names, "fs", "a.b");
        // A second server whose tool's plain candidate is exactly that suffixed name.
        let tool = taken.strip_prefix("fs__").unwrap().to_owned();
        names.replace(
            &id("fs"),
            &strings(&["a.b", "a_b"]),
            &strings(&["a.b", "a_b", &tool]),
        );
        assert_eq!(
            name_of(&names, "fs", &tool),
            taken,
            "the plain candidate wins"
        );
        let moved = name_of(&names, "fs", "a.b");
        assert_ne!(moved, taken);
        assert_eq!(moved, suffixed("fs__a_b", &id("fs"), "a.b", 1));
        assert_eq!(names.len(), 3);
        for t in ["a.b", "a_b", tool.as_str()] {
            let n = name_of(&names, "fs", t);
            assert!(is_valid_name(&n));
            assert_eq!(names.route(&n).unwrap().tool, t);
        }
    }

    #[test]
    fn over_long_names_are_shortened() {
        let mut names = Names::default();
        let long_a = format!("{}a", "x".repeat(70));
        let long_b = format!("{}b", "x".repeat(70));
        names.replace(&id("srv"), &[], &[long_a.clone(), long_b.clone()]);
        let a = name_of(&names, "srv", &long_a);
        let b = name_of(&names, "srv", &long_b);
        assert_eq!((a.len(), b.len()), (64, 64));
        assert_ne!(a, b);
        assert!(a.starts_with("srv__xxxx"));
        // A long server id: the id itself is cut.
        let server = format!("s{}", "e".repeat(80));
        names.replace(&id(&server), &[], &strings(&["t"]));
        let n = name_of(&names, &server, "t");
        assert!(is_valid_name(&n) && !n.contains("__"));
    }
}
