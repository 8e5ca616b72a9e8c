//! The whole file: which layout, its server sections (and a Claude Code project's), VS Code's
//! `inputs`, and our `permissions`.

use std::collections::BTreeMap;

use jsonc_parser::ast::{Object, ObjectProp, Value};

use super::entry::{self, Context};
use super::error::{ConfigError, ConfigErrorKind as K};
use super::interpolate::Vars;
use super::json::{self, Lines, Members};
use super::{ConfigFile, Input, Layout, Permissions, Rule, Section};

/// The keys of the top level that are read; a duplicate of any other key is none of our
/// business.
const READ: [&str; 5] = ["mcpServers", "servers", "inputs", "permissions", "projects"];

struct Report<'f, 'l> {
    file: &'f str,
    lines: &'l Lines<'l>,
    errors: Vec<ConfigError>,
}

impl Report<'_, '_> {
    fn push(&mut self, offset: usize, server: Option<&str>, kind: K) {
        self.errors.push(ConfigError {
            file: self.file.to_owned(),
            position: self.lines.position(offset),
            server: server.map(str::to_owned),
            kind,
        });
    }
}

pub(super) fn read(file: &str, text: &str, vars: &Vars<'_>) -> ConfigFile {
    let lines = Lines::new(text);
    let mut report = Report {
        file,
        lines: &lines,
        errors: Vec::new(),
    };
    let mut config = ConfigFile {
        file: file.to_owned(),
        layout: Layout::NoServers,
        servers: Vec::new(),
        inputs: Vec::new(),
        permissions: Permissions::default(),
        errors: Vec::new(),
    };
    let root = match json::parse(text) {
        Err((offset, reason)) => {
            report.push(offset, None, K::Syntax { reason });
            config.errors = report.errors;
            return config;
        }
        // Empty, or only comments: nothing configured (VS Code reads it so too).
        Ok(None) => return config,
        Ok(Some(value)) => value,
    };
    let Value::Object(root) = &root else {
        report.push(
            json::start(&root),
            None,
            K::NotAnObject {
                found: json::kind(&root),
            },
        );
        config.errors = report.errors;
        return config;
    };
    let members = Members::of(root);
    for (dup, other) in &members.duplicates {
        let name = json::key(dup);
        if READ.contains(&name) {
            report.push(
                dup.range.start,
                None,
                K::DuplicateKey {
                    field: name.to_owned(),
                    other: lines.position(*other),
                },
            );
        }
    }

    config.inputs = inputs(&members, &mut report);
    config.permissions = permissions(&members, &mut report);
    let cx = Context {
        lines: &lines,
        vars,
        inputs: &config.inputs,
    };

    // The top-level sections share one namespace: a server in both `mcpServers` and
    // `servers` is a duplicate like one given twice in either.
    let mut top = Vec::new();
    let mut present = (false, false);
    if let Some(object) = section(&members, "mcpServers", &mut report) {
        present.0 = true;
        top.extend(object.properties.iter().map(|p| (p, Section::McpServers)));
    }
    if let Some(object) = section(&members, "servers", &mut report) {
        present.1 = true;
        top.extend(object.properties.iter().map(|p| (p, Section::Servers)));
    }
    config.layout = match present {
        (true, true) => Layout::Both,
        (true, false) => Layout::McpServers,
        (false, true) => Layout::VsCode,
        (false, false) => Layout::NoServers,
    };
    top.sort_by_key(|(p, _)| p.range.start);
    let mut servers = entries(&cx, top, &mut report);
    if let Some((path, object)) = project(&members, vars, &mut report) {
        let props = object
            .properties
            .iter()
            .map(|p| {
                (
                    p,
                    Section::Project {
                        path: path.to_owned(),
                    },
                )
            })
            .collect();
        servers.extend(entries(&cx, props, &mut report));
    }
    config.servers = servers;
    config.errors = report.errors;
    config.errors.sort_by(|a, b| {
        (a.position, &a.server)
            .cmp(&(b.position, &b.server))
            .then_with(|| a.kind.to_string().cmp(&b.kind.to_string()))
    });
    config
}

/// The object under a top-level key, or `None` (absent, duplicated, or not an object:
/// reported).
fn section<'o, 'a>(
    members: &Members<'o, 'a>,
    name: &str,
    report: &mut Report<'_, '_>,
) -> Option<&'o Object<'a>> {
    let prop = members.get(name)?;
    match &prop.value {
        Value::Object(object) => Some(object),
        other => {
            report.push(
                json::start(other),
                None,
                K::WrongType {
                    field: name.to_owned(),
                    expected: "an object of servers",
                    found: json::kind(other),
                },
            );
            None
        }
    }
}

/// The entries of one namespace (the top-level sections, or one project's), in the file's
/// order. Every definition of an id given more than once is rejected.
fn entries(
    cx: &Context<'_, '_>,
    props: Vec<(&ObjectProp<'_>, Section)>,
    report: &mut Report<'_, '_>,
) -> Vec<super::Entry> {
    let mut by_id: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, (prop, _)) in props.iter().enumerate() {
        by_id.entry(json::key(prop)).or_default().push(i);
    }
    let mut loaded = Vec::new();
    for (i, (prop, section)) in props.iter().enumerate() {
        let id = json::key(prop);
        let other = by_id
            .get(id)
            .and_then(|all| all.iter().copied().find(|&j| j != i))
            .and_then(|j| props.get(j));
        if let Some((other, other_section)) = other {
            report.push(
                prop.range.start,
                Some(id),
                K::DuplicateKey {
                    field: format!("{}.{id}", other_section.path()),
                    other: cx.lines.position(other.range.start),
                },
            );
            continue;
        }
        let position = cx.lines.position(prop.range.start);
        match entry::read(cx, prop, section.clone(), position) {
            Ok(entry) => loaded.push(entry),
            Err(problems) => {
                for (offset, kind) in problems {
                    report.push(offset, Some(id), kind);
                }
            }
        }
    }
    loaded
}

/// Claude Code's `~/.claude.json`: `projects.<workspace folder>.mcpServers` (the "local"
/// scope). The key is matched exactly, or else ignoring a trailing `/` or `\`.
fn project<'o, 'a>(
    members: &Members<'o, 'a>,
    vars: &Vars<'_>,
    report: &mut Report<'_, '_>,
) -> Option<(&'o str, &'o Object<'a>)> {
    let folder = vars.workspace_folder()?;
    let Value::Object(projects) = &members.get("projects")?.value else {
        return None; // another tool's data under a key we only look into
    };
    let trim = |s: &'o str| s.trim_end_matches(['/', '\\']);
    let wanted = folder.trim_end_matches(['/', '\\']);
    let project = projects
        .properties
        .iter()
        .find(|p| json::key(p) == folder)
        .or_else(|| {
            projects
                .properties
                .iter()
                .find(|p| trim(json::key(p)) == wanted)
        })?;
    let Value::Object(project_object) = &project.value else {
        return None;
    };
    let servers = Members::of(project_object);
    let path = json::key(project);
    for (dup, other) in &servers.duplicates {
        if json::key(dup) == "mcpServers" {
            report.push(
                dup.range.start,
                None,
                K::DuplicateKey {
                    field: format!("projects.{path:?}.mcpServers"),
                    other: report.lines.position(*other),
                },
            );
        }
    }
    let prop = servers.get("mcpServers")?;
    match &prop.value {
        Value::Object(object) => Some((path, object)),
        other => {
            report.push(
                json::start(other),
                None,
                K::WrongType {
                    field: format!("projects.{path:?}.mcpServers"),
                    expected: "an object of servers",
                    found: json::kind(other),
                },
            );
            None
        }
    }
}

/// VS Code's `inputs`: `[{"type": "promptString", "id": ..., "description": ..., "password":
/// true}]`.
fn inputs(members: &Members<'_, '_>, report: &mut Report<'_, '_>) -> Vec<Input> {
    let Some(prop) = members.get("inputs") else {
        return Vec::new();
    };
    let Value::Array(array) = &prop.value else {
        report.push(
            json::start(&prop.value),
            None,
            K::WrongType {
                field: "inputs".to_owned(),
                expected: "an array of objects",
                found: json::kind(&prop.value),
            },
        );
        return Vec::new();
    };
    let mut inputs = Vec::new();
    for (i, element) in array.elements.iter().enumerate() {
        let Value::Object(object) = element else {
            report.push(
                json::start(element),
                None,
                K::WrongType {
                    field: format!("inputs[{i}]"),
                    expected: "an object",
                    found: json::kind(element),
                },
            );
            continue;
        };
        let fields = Members::of(object);
        let string = |name: &str| match fields.get(name).map(|p| &p.value) {
            Some(Value::StringLit(s)) => Some(s.value.to_string()),
            _ => None,
        };
        let Some(id) = string("id") else {
            report.push(
                object.range.start,
                None,
                K::InvalidValue {
                    field: format!("inputs[{i}]"),
                    expected: "an object with an `id` string",
                },
            );
            continue;
        };
        let password = matches!(
            fields.get("password").map(|p| &p.value),
            Some(Value::BooleanLit(b)) if b.value
        );
        inputs.push(Input {
            id,
            description: string("description"),
            password,
            position: report.lines.position(object.range.start),
        });
    }
    inputs
}

/// Our `permissions`: `{"allow": [...], "ask": [...], "deny": [...], "billing": [...]}`, rules
/// as strings with their positions (parsed elsewhere).
fn permissions(members: &Members<'_, '_>, report: &mut Report<'_, '_>) -> Permissions {
    let mut permissions = Permissions::default();
    let Some(prop) = members.get("permissions") else {
        return permissions;
    };
    let Value::Object(object) = &prop.value else {
        report.push(
            json::start(&prop.value),
            None,
            K::WrongType {
                field: "permissions".to_owned(),
                expected: "an object with `allow`, `ask` and `deny` arrays",
                found: json::kind(&prop.value),
            },
        );
        return permissions;
    };
    let lists = Members::of(object);
    for (dup, other) in &lists.duplicates {
        report.push(
            dup.range.start,
            None,
            K::DuplicateKey {
                field: format!("permissions.{}", json::key(dup)),
                other: report.lines.position(*other),
            },
        );
    }
    for (name, rules) in [
        ("allow", &mut permissions.allow),
        ("ask", &mut permissions.ask),
        ("deny", &mut permissions.deny),
        ("billing", &mut permissions.billing),
    ] {
        let Some(prop) = lists.get(name) else {
            continue;
        };
        let Value::Array(array) = &prop.value else {
            report.push(
                json::start(&prop.value),
                None,
                K::WrongType {
                    field: format!("permissions.{name}"),
                    expected: "an array of strings",
                    found: json::kind(&prop.value),
                },
            );
            continue;
        };
        for (i, element) in array.elements.iter().enumerate() {
            match element {
                Value::StringLit(s) => rules.push(Rule {
                    text: s.value.to_string(),
                    position: report.lines.position(s.range.start),
                }),
                other => report.push(
                    json::start(other),
                    None,
                    K::WrongType {
                        field: format!("permissions.{name}[{i}]"),
                        expected: "a string",
                        found: json::kind(other),
                    },
                ),
            }
        }
    }
    permissions
}
