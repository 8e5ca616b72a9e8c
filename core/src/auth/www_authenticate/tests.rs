#![allow(clippy::unwrap_used)]

use super::*;
use proptest::prelude::*;

fn parse(value: &str) -> Vec<Challenge> {
    match parse_challenges([value]) {
        Ok(c) => c,
        Err(e) => panic!("{value:?} did not parse: {e}"),
    }
}

fn err(value: &str) -> ChallengeError {
    match parse_challenges([value]) {
        Ok(c) => panic!("{value:?} parsed as {c:?}"),
        Err(e) => e,
    }
}

fn ch(scheme: &str, params: &[(&str, &str)]) -> Challenge {
    Challenge {
        scheme: scheme.to_owned(),
        token68: None,
        params: params
            .iter()
            .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
            .collect(),
    }
}

fn t68(scheme: &str, token68: &str) -> Challenge {
    Challenge {
        scheme: scheme.to_owned(),
        token68: Some(token68.to_owned()),
        params: Vec::new(),
    }
}

const PRM: &str = "https://mcp.example.com/.well-known/oauth-protected-resource";

// ---- RFC and spec examples ---------------------------------------------------------------

#[test]
fn rfc9110_section_11_6_1_example_two_challenges_in_one_value() {
    // The example's line fold is presentation; the field value is one line.
    let v = r#"Newauth realm="apps", type=1, title="Login to \"apps\"", Basic realm="simple""#;
    assert_eq!(
        parse(v),
        vec![
            ch(
                "Newauth",
                &[
                    ("realm", "apps"),
                    ("type", "1"),
                    ("title", r#"Login to "apps""#)
                ]
            ),
            ch("Basic", &[("realm", "simple")]),
        ]
    );
}

#[test]
fn rfc7617_basic_with_charset() {
    assert_eq!(
        parse(r#"Basic realm="foo", charset="UTF-8""#),
        vec![ch("Basic", &[("realm", "foo"), ("charset", "UTF-8")])]
    );
    assert_eq!(
        parse(r#"Basic realm="WallyWorld""#),
        vec![ch("Basic", &[("realm", "WallyWorld")])]
    );
}

#[test]
fn rfc6750_section_3_examples() {
    let b = BearerChallenge::from_headers([r#"Bearer realm="example""#])
        .unwrap()
        .unwrap();
    assert_eq!(b.realm.as_deref(), Some("example"));
    assert_eq!(b.error, None);

    let b = BearerChallenge::from_headers([
        r#"Bearer realm="example", error="invalid_token", error_description="The access token expired""#,
    ])
    .unwrap()
    .unwrap();
    assert!(b.is_invalid_token());
    assert!(!b.is_insufficient_scope());
    assert_eq!(
        b.error_description.as_deref(),
        Some("The access token expired")
    );
}

#[test]
fn rfc9728_section_5_1_example_with_bws_after_the_equals_sign() {
    // The RFC folds the value over lines after `resource_metadata=`; unfolded, that leaves BWS.
    let v = "Bearer error=\"invalid_request\", error_description=\"No access token was provided \
             in this request\", resource_metadata= \
             \"https://resource.example.com/.well-known/oauth-protected-resource\"";
    let b = BearerChallenge::from_headers([v]).unwrap().unwrap();
    assert!(b.is_invalid_request());
    assert_eq!(
        b.resource_metadata.as_deref(),
        Some("https://resource.example.com/.well-known/oauth-protected-resource")
    );
}

#[test]
fn rfc7616_digest_keeps_commas_inside_quoted_strings() {
    let v = r#"Digest realm="http-auth@example.org", qop="auth, auth-int", algorithm=SHA-256, nonce="7ypf/xlj9XXwfDPEoM4URrv/xwf94BcCAzFZH4GiTo0v", opaque="FQhe/qaU925kfnzjCev0ciny7QMkPqMAFRtzCUYo5tdS""#;
    let c = parse(v);
    assert_eq!(c.len(), 1);
    assert_eq!(c[0].param("qop"), Some("auth, auth-int"));
    assert_eq!(c[0].param("algorithm"), Some("SHA-256"));
    assert_eq!(c[0].params.len(), 5);
}

#[test]
fn mcp_spec_401_with_scope_guidance() {
    // basic/authorization/index.mdx, "Scope Selection Strategy" (unfolded).
    let v = format!(r#"Bearer resource_metadata="{PRM}", scope="files:read""#);
    let b = BearerChallenge::from_headers([v.as_str()])
        .unwrap()
        .unwrap();
    assert_eq!(b.resource_metadata.as_deref(), Some(PRM));
    assert_eq!(b.scopes().collect::<Vec<_>>(), ["files:read"]);
    assert!(!b.is_insufficient_scope());
}

#[test]
fn mcp_spec_403_insufficient_scope() {
    // basic/authorization/index.mdx, "Runtime Insufficient Scope Errors" (unfolded).
    let v = format!(
        r#"Bearer error="insufficient_scope", scope="files:write", resource_metadata="{PRM}", error_description="File write permission required for this operation""#
    );
    let b = BearerChallenge::from_headers([v.as_str()])
        .unwrap()
        .unwrap();
    assert!(b.is_insufficient_scope());
    assert!(!b.is_invalid_token());
    assert_eq!(b.scope.as_deref(), Some("files:write"));
    assert_eq!(b.resource_metadata.as_deref(), Some(PRM));
    assert_eq!(
        b.error_description.as_deref(),
        Some("File write permission required for this operation")
    );
}

// ---- several challenges ------------------------------------------------------------------

#[test]
fn basic_then_bearer_in_one_value() {
    let v = format!(r#"Basic realm="x", Bearer resource_metadata="{PRM}", scope="a b""#);
    let c = parse(&v);
    assert_eq!(
        c,
        vec![
            ch("Basic", &[("realm", "x")]),
            ch("Bearer", &[("resource_metadata", PRM), ("scope", "a b")]),
        ]
    );
    let b = bearer(&c).unwrap();
    assert_eq!(b.resource_metadata.as_deref(), Some(PRM));
    assert_eq!(b.scopes().collect::<Vec<_>>(), ["a", "b"]);
    assert_eq!(b.realm, None);
}

#[test]
fn challenges_across_values_come_out_in_order() {
    let c = parse_challenges([
        r#"Basic realm="x""#,
        "Negotiate abc==, NTLM",
        r#"Bearer scope="a""#,
    ])
    .unwrap();
    assert_eq!(
        c,
        vec![
            ch("Basic", &[("realm", "x")]),
            t68("Negotiate", "abc=="),
            ch("NTLM", &[]),
            ch("Bearer", &[("scope", "a")]),
        ]
    );
}

#[test]
fn the_first_bearer_challenge_is_the_one_read() {
    let c = parse_challenges([
        r#"Basic realm="a""#,
        r#"Bearer realm="first", scope="s1""#,
        r#"Bearer realm="second", scope="s2""#,
    ])
    .unwrap();
    let b = bearer(&c).unwrap();
    assert_eq!(b.realm.as_deref(), Some("first"));
    assert_eq!(b.scope.as_deref(), Some("s1"));
}

#[test]
fn schemes_without_parameters_between_others() {
    assert_eq!(
        parse(r#"Foo, Bar a=1, Baz, Qux"#),
        vec![
            ch("Foo", &[]),
            ch("Bar", &[("a", "1")]),
            ch("Baz", &[]),
            ch("Qux", &[])
        ]
    );
}

#[test]
fn no_bearer_challenge_is_none() {
    assert_eq!(
        BearerChallenge::from_headers([r#"Basic realm="x""#]).unwrap(),
        None
    );
    assert_eq!(BearerChallenge::from_headers([]).unwrap(), None);
}

#[test]
fn challenges_from_http_headers() {
    let mut h = Headers::new();
    h.append("www-authenticate", r#"Basic realm="x""#).unwrap();
    h.append("Content-Type", "application/json").unwrap();
    h.append("WWW-Authenticate", r#"Bearer scope="a""#).unwrap();
    let c = challenges_from_headers(&h).unwrap();
    assert_eq!(
        c,
        vec![
            ch("Basic", &[("realm", "x")]),
            ch("Bearer", &[("scope", "a")])
        ]
    );
    assert_eq!(challenges_from_headers(&Headers::new()).unwrap(), vec![]);
}

// ---- token68 -----------------------------------------------------------------------------

#[test]
fn token68_with_padding() {
    assert_eq!(parse("Negotiate abc=="), vec![t68("Negotiate", "abc==")]);
    assert_eq!(
        parse("Negotiate YIIGhgYGKwYBBQUCoIIGejCCBnag+/A~z._-="),
        vec![t68("Negotiate", "YIIGhgYGKwYBBQUCoIIGejCCBnag+/A~z._-=")]
    );
    assert_eq!(parse("Negotiate"), vec![ch("Negotiate", &[])]);
}

#[test]
fn token68_followed_by_another_challenge() {
    assert_eq!(
        parse(r#"Negotiate abc== , Basic realm="x""#),
        vec![t68("Negotiate", "abc=="), ch("Basic", &[("realm", "x")])]
    );
}

#[test]
fn a_name_and_equals_that_end_the_element_are_a_token68() {
    // `a=` with nothing after it can only be a token68: a parameter needs a value.
    assert_eq!(parse("Foo a="), vec![t68("Foo", "a=")]);
    assert_eq!(parse("Foo a=, Bar"), vec![t68("Foo", "a="), ch("Bar", &[])]);
    // With a value it is a parameter, whatever the whitespace.
    for v in [
        "Foo a=b",
        "Foo a =b",
        "Foo a= b",
        "Foo a = b",
        "Foo\ta\t=\tb",
    ] {
        assert_eq!(parse(v), vec![ch("Foo", &[("a", "b")])], "{v:?}");
    }
}

// ---- quoted-strings ----------------------------------------------------------------------

#[test]
fn quoted_pairs_are_unescaped() {
    let c = parse(r#"Bearer realm="a \"b\" \\ c \d", scope="""#);
    assert_eq!(c[0].param("realm"), Some(r#"a "b" \ c d"#));
    assert_eq!(c[0].param("scope"), Some(""));
}

#[test]
fn quoted_strings_keep_commas_equals_and_non_ascii() {
    let c = parse(r#"Bearer realm="Zürich, =x= ☃", error_description="a\é""#);
    assert_eq!(c[0].param("realm"), Some("Zürich, =x= ☃"));
    assert_eq!(c[0].param("error_description"), Some("aé"));
}

#[test]
fn token_and_quoted_forms_are_the_same_value() {
    assert_eq!(parse("Bearer scope=abc"), parse(r#"Bearer scope="abc""#));
}

#[test]
fn tabs_inside_a_quoted_string_are_kept() {
    assert_eq!(
        parse("Bearer realm=\"a\tb\"")[0].param("realm"),
        Some("a\tb")
    );
}

// ---- whitespace and empty elements -------------------------------------------------------

#[test]
fn whitespace_variants_parse_alike() {
    let expected = vec![
        ch("Basic", &[("realm", "x")]),
        ch("Bearer", &[("realm", "y"), ("scope", "a"), ("error", "b")]),
    ];
    for v in [
        r#"Basic realm="x", Bearer realm="y", scope=a, error=b"#,
        r#"Basic realm="x",Bearer realm="y",scope=a,error=b"#,
        "  Basic   realm = \"x\" ,  Bearer\trealm=\"y\"\t,\tscope= a ,error =b  ",
        "\tBasic realm=\"x\"\t,\t\tBearer realm =\t\"y\", scope =a, error= b\t",
    ] {
        assert_eq!(parse(v), expected, "{v:?}");
    }
}

#[test]
fn empty_list_elements_are_skipped() {
    let expected = vec![
        ch("Basic", &[("realm", "x"), ("charset", "UTF-8")]),
        ch("Bearer", &[]),
    ];
    for v in [
        r#", , Basic realm="x" ,, , charset="UTF-8",Bearer,"#,
        r#",Basic realm="x",charset="UTF-8",,,Bearer,,"#,
        r#"Basic ,realm="x", , charset="UTF-8", Bearer"#,
    ] {
        assert_eq!(parse(v), expected, "{v:?}");
    }
}

#[test]
fn a_parameter_after_a_comma_right_after_the_scheme_belongs_to_it() {
    assert_eq!(
        parse(r#"Bearer, scope="a""#),
        vec![ch("Bearer", &[("scope", "a")])]
    );
}

#[test]
fn empty_values_give_no_challenges() {
    assert_eq!(parse_challenges([]).unwrap(), vec![]);
    assert_eq!(parse_challenges([""]).unwrap(), vec![]);
    assert_eq!(parse_challenges(["  ", " , ,\t", ""]).unwrap(), vec![]);
}

// ---- case-insensitivity ------------------------------------------------------------------

#[test]
fn schemes_and_parameter_names_are_case_insensitive() {
    let c = parse(r#"bEaReR SCOPE="a b", Resource_Metadata="https://x""#);
    assert_eq!(c[0].scheme, "bEaReR", "kept as received");
    assert!(c[0].is_scheme("Bearer"));
    assert!(c[0].is_scheme("BEARER"));
    assert!(!c[0].is_scheme("Basic"));
    assert_eq!(c[0].param("scope"), Some("a b"));
    assert_eq!(c[0].params[0].0, "SCOPE");
    let b = bearer(&c).unwrap();
    assert_eq!(b.scope.as_deref(), Some("a b"));
    assert_eq!(b.resource_metadata.as_deref(), Some("https://x"));
}

#[test]
fn error_codes_are_compared_exactly() {
    let b = BearerChallenge::from_headers([r#"Bearer error="Insufficient_Scope""#])
        .unwrap()
        .unwrap();
    assert!(!b.is_insufficient_scope());
}

// ---- the Bearer view ---------------------------------------------------------------------

#[test]
fn scopes_split_on_spaces_and_skip_empty_ones() {
    let b = BearerChallenge::from_headers([r#"Bearer scope="  files:read   files:write x ""#])
        .unwrap()
        .unwrap();
    assert_eq!(
        b.scopes().collect::<Vec<_>>(),
        ["files:read", "files:write", "x"]
    );
    assert_eq!(BearerChallenge::default().scopes().count(), 0);
    let b = BearerChallenge::from_headers([r#"Bearer scope="""#])
        .unwrap()
        .unwrap();
    assert_eq!(b.scope.as_deref(), Some(""));
    assert_eq!(b.scopes().count(), 0);
}

#[test]
fn every_bearer_field_is_read() {
    let b = BearerChallenge::from_headers([
        r#"Bearer realm="r", scope="s", error="e", error_description="d", error_uri="https://e", resource_metadata="https://m", other="o""#,
    ])
    .unwrap()
    .unwrap();
    let expected = BearerChallenge {
        realm: Some("r".into()),
        scope: Some("s".into()),
        error: Some("e".into()),
        error_description: Some("d".into()),
        error_uri: Some("https://e".into()),
        resource_metadata: Some("https://m".into()),
    };
    assert_eq!(b, expected);
}

#[test]
fn a_bearer_token68_gives_an_empty_view() {
    let c = parse("Bearer abc==");
    assert_eq!(bearer(&c), Some(BearerChallenge::default()));
    assert_eq!(BearerChallenge::from_challenge(&ch("Basic", &[])), None);
}

// ---- errors, one test per variant --------------------------------------------------------

#[test]
fn too_long_in_one_value_or_in_total() {
    let at_limit = format!("Bearer realm=\"{}\"", "x".repeat(MAX_CHALLENGE_BYTES - 15));
    assert_eq!(at_limit.len(), MAX_CHALLENGE_BYTES);
    assert!(parse_challenges([at_limit.as_str()]).is_ok());
    let over = format!("{at_limit} ");
    assert_eq!(
        parse_challenges([over.as_str()]),
        Err(ChallengeError::TooLong {
            limit: MAX_CHALLENGE_BYTES
        })
    );
    let half = format!("Basic realm=\"{}\"", "x".repeat(9000));
    let e = parse_challenges([half.as_str(), half.as_str()]).unwrap_err();
    assert_eq!(
        e,
        ChallengeError::TooLong {
            limit: MAX_CHALLENGE_BYTES
        }
    );
    assert_eq!(e.position(), None);
    assert!(e.to_string().contains("16384 bytes"), "{e}");
}

#[test]
fn control_characters_are_refused_anywhere() {
    for (v, offset, byte) in [
        ("Bearer realm=\"a\nb\"", 15, b'\n'),
        ("Bearer\r\n realm=\"x\"", 6, b'\r'),
        ("Bearer realm=x\0", 14, 0),
        ("Bearer realm=\"\x7f\"", 14, 0x7f),
        ("\x1b[31mBearer", 0, 0x1b),
    ] {
        assert_eq!(
            err(v),
            ChallengeError::ControlCharacter {
                value: 0,
                offset,
                byte
            },
            "{v:?}"
        );
    }
    assert!(err("Bearer realm=\"a\nb\"")
        .to_string()
        .contains("control character 0x0A"));
}

#[test]
fn unexpected_characters_name_what_was_expected() {
    for (v, offset, found, expected) in [
        // Two parameters without a comma between them.
        (
            r#"Bearer realm="x" scope="y""#,
            17,
            's',
            Expected::CommaOrEnd,
        ),
        (r#"Bearer realm=@"#, 13, '@', Expected::ParamValue),
        (r#"Bearer a=1, realm=,"#, 18, ',', Expected::ParamValue),
        (r#""Bearer""#, 0, '"', Expected::Scheme),
        (r#"Basic realm="x", "y""#, 17, '"', Expected::SchemeOrParam),
        (r#"Basic"x""#, 5, '"', Expected::AfterScheme),
        (r#"Basic/x"#, 5, '/', Expected::AfterScheme),
        (r#"Basic "x""#, 6, '"', Expected::Token68OrParam),
        (
            r#"Basic realm="x", Bearer @"#,
            24,
            '@',
            Expected::Token68OrParam,
        ),
        (r#"Basic a!b c"#, 10, 'c', Expected::Equals),
        (r#"Negotiate abc/def x"#, 18, 'x', Expected::CommaOrEnd),
        (r#"Negotiate abc== x"#, 16, 'x', Expected::CommaOrEnd),
        // Non-ASCII outside a quoted-string.
        (r#"Bearer realm=Zürich"#, 14, 'ü', Expected::CommaOrEnd),
        ("Bearér", 4, 'é', Expected::AfterScheme),
        (r#"Bearer realm="x"""#, 16, '"', Expected::CommaOrEnd),
    ] {
        assert_eq!(
            err(v),
            ChallengeError::UnexpectedCharacter {
                value: 0,
                offset,
                found,
                expected
            },
            "{v:?}"
        );
    }
    let e = err(r#"Bearer realm="x" scope="y""#);
    assert_eq!(
        e.to_string(),
        "WWW-Authenticate value 0, byte 17: expected a comma or the end of the value, found 's'"
    );
}

#[test]
fn a_parameter_without_its_value_is_an_unexpected_end() {
    for (v, offset) in [
        (r#"Bearer realm="x", scope="#, 24),
        ("Bearer a =", 10),
        ("Bearer a = \t", 12),
    ] {
        assert_eq!(
            err(v),
            ChallengeError::UnexpectedEnd {
                value: 0,
                offset,
                expected: Expected::ParamValue
            },
            "{v:?}"
        );
    }
}

#[test]
fn unterminated_quoted_strings() {
    for v in [
        r#"Bearer realm="abc"#,
        r#"Bearer realm="abc\"#,
        r#"Bearer realm="abc\""#,
    ] {
        assert_eq!(
            err(v),
            ChallengeError::UnterminatedQuotedString {
                value: 0,
                offset: 13
            },
            "{v:?}"
        );
    }
}

#[test]
fn a_parameter_needs_a_scheme_before_it_in_its_own_value() {
    assert_eq!(
        err(r#"realm="x", Bearer"#),
        ChallengeError::ParamWithoutScheme {
            value: 0,
            offset: 0,
            name: "realm".into()
        }
    );
    assert_eq!(
        err(r#" , realm = "x""#),
        ChallengeError::ParamWithoutScheme {
            value: 0,
            offset: 3,
            name: "realm".into()
        }
    );
    // BWS is allowed before `=`, so this is a parameter named `Basic`, not a scheme.
    assert_eq!(
        err(r#"Basic ="x""#),
        ChallengeError::ParamWithoutScheme {
            value: 0,
            offset: 0,
            name: "Basic".into()
        }
    );
    // Each value is a list of challenges of its own.
    let e = parse_challenges(["Bearer", r#"scope="a""#]).unwrap_err();
    assert_eq!(
        e,
        ChallengeError::ParamWithoutScheme {
            value: 1,
            offset: 0,
            name: "scope".into()
        }
    );
    assert_eq!(e.position(), Some((1, 0)));
}

#[test]
fn a_token68_challenge_has_no_parameters() {
    assert_eq!(
        err(r#"Negotiate abc==, realm="x""#),
        ChallengeError::ParamAfterToken68 {
            value: 0,
            offset: 17,
            scheme: "Negotiate".into()
        }
    );
    assert_eq!(
        err("Foo a=,b=c"),
        ChallengeError::ParamAfterToken68 {
            value: 0,
            offset: 7,
            scheme: "Foo".into()
        }
    );
}

#[test]
fn a_parameter_name_may_occur_once_per_challenge() {
    assert_eq!(
        err(r#"Bearer scope="a", Scope="b""#),
        ChallengeError::DuplicateParam {
            value: 0,
            offset: 18,
            scheme: "Bearer".into(),
            name: "Scope".into()
        }
    );
    // The same name in two challenges is fine.
    assert_eq!(parse(r#"Basic realm="a", Bearer realm="b""#).len(), 2);
    let e = parse_challenges(["Basic", r#"Bearer scope=a, scope=a"#]).unwrap_err();
    assert_eq!(e.position(), Some((1, 16)));
}

#[test]
fn names_in_errors_are_clipped() {
    let long = "n".repeat(200);
    let ChallengeError::ParamWithoutScheme { name, .. } = err(&format!("{long}=x")) else {
        panic!("wrong variant");
    };
    assert_eq!(name.len(), 64);
}

// ---- snapshot ------------------------------------------------------------------------------

#[test]
fn representative_header_snapshot() {
    let parsed = parse_challenges([
        r#"Basic realm="mcp", charset="UTF-8""#,
        r#"Bearer error="insufficient_scope", scope="files:read files:write", resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource", error_description="File write permission required: \"files:write\"""#,
        "Negotiate YIIGhgYGKwYBBQUCoIIGejCCBnag==",
    ])
    .unwrap();
    let view = bearer(&parsed);
    insta::assert_debug_snapshot!((parsed, view));
}

// ---- properties ----------------------------------------------------------------------------

/// The layout choices of [`render`], read cyclically from proptest's bytes.
struct Style<'a>(std::iter::Cycle<std::slice::Iter<'a, u8>>);

impl Style<'_> {
    fn next(&mut self) -> u8 {
        self.0.next().copied().unwrap_or(0)
    }

    fn ows(&mut self) -> &'static str {
        ["", " ", "\t", "  ", " \t "][usize::from(self.next() % 5)]
    }

    fn bws(&mut self) -> &'static str {
        ["", " ", "\t"][usize::from(self.next() % 3)]
    }
}

/// A test serializer: renders challenges (each inner list one header value) with the layout
/// choices in `style`: OWS around commas and `=`, empty list elements, token or quoted-string
/// values, needless quoted-pairs.
fn render(values: &[Vec<Challenge>], style: &[u8]) -> Vec<String> {
    let mut st = Style(style.iter().cycle());
    let mut out = Vec::new();
    for challenges in values {
        let mut elements = Vec::new();
        for c in challenges {
            let mut head = c.scheme.clone();
            if let Some(t) = &c.token68 {
                head.push_str([" ", "  ", "\t"][usize::from(st.next() % 3)]);
                head.push_str(t);
                elements.push(head);
                continue;
            }
            let mut params = c.params.iter();
            match params.next() {
                None => elements.push(head),
                Some((n, v)) => {
                    head.push_str([" ", "  ", "\t", " \t"][usize::from(st.next() % 4)]);
                    if st.next() % 8 == 0 {
                        // An empty element between the scheme and its first parameter.
                        head.push(',');
                        head.push_str(st.ows());
                    }
                    head.push_str(&render_param(n, v, &mut st));
                    elements.push(head);
                }
            }
            for (n, v) in params {
                elements.push(render_param(n, v, &mut st));
            }
        }
        let mut s = String::new();
        // Leading empty elements.
        if st.next() % 4 == 0 {
            s.push_str(st.ows());
            s.push(',');
        }
        for (i, e) in elements.iter().enumerate() {
            s.push_str(st.ows());
            if i > 0 {
                s.push(',');
                if st.next() % 8 == 0 {
                    s.push_str(st.ows());
                    s.push(',');
                }
                s.push_str(st.ows());
            }
            s.push_str(e);
        }
        s.push_str(st.ows());
        if st.next() % 4 == 0 {
            s.push(',');
            s.push_str(st.ows());
        }
        out.push(s);
    }
    out
}

fn render_param(name: &str, value: &str, st: &mut Style<'_>) -> String {
    let mut s = format!("{name}{}={}", st.bws(), st.bws());
    if !value.is_empty() && value.bytes().all(is_tchar) && st.next() % 2 == 0 {
        s.push_str(value);
        return s;
    }
    s.push('"');
    for c in value.chars() {
        if c == '"' || c == '\\' || st.next() % 16 == 0 {
            s.push('\\');
        }
        s.push(c);
    }
    s.push('"');
    s
}

fn tchar_string(max: usize) -> impl Strategy<Value = String> {
    proptest::string::string_regex(&format!("[A-Za-z0-9!#$%&'*+.^_`|~-]{{1,{max}}}"))
        .unwrap_or_else(|e| panic!("{e}"))
}

fn challenge_strategy() -> impl Strategy<Value = Challenge> {
    let token68 = "[A-Za-z0-9._~+/-]{1,12}={0,2}";
    let value = prop_oneof![
        tchar_string(8),
        "[ -~\t]{0,12}".prop_map(String::from),
        "([ -~]|é|☃){0,6}".prop_map(String::from),
    ];
    (
        tchar_string(8),
        prop_oneof![
            1 => token68.prop_map(Some),
            4 => Just(None),
        ],
        prop::collection::vec((tchar_string(6), value), 0..5),
    )
        .prop_map(|(scheme, token68, params)| {
            let mut unique: Vec<(String, String)> = Vec::new();
            if token68.is_none() {
                for (n, v) in params {
                    if !unique.iter().any(|(u, _)| u.eq_ignore_ascii_case(&n)) {
                        unique.push((n, v));
                    }
                }
            }
            Challenge {
                scheme,
                token68,
                params: unique,
            }
        })
}

/// Strings over the grammar's own alphabet, so that most of them get far into the parser.
const GRAMMAR_ALPHABET: &str = "[ \t,=\"\\\\a-zA-Z0-9/+~._!#-]{0,48}";

fn check_invariants(challenges: &[Challenge]) {
    for c in challenges {
        assert!(!c.scheme.is_empty() && c.scheme.bytes().all(is_tchar));
        assert!(c.token68.is_none() || c.params.is_empty());
        for (i, (n, _)) in c.params.iter().enumerate() {
            assert!(!n.is_empty() && n.bytes().all(is_tchar));
            assert!(c.params[..i]
                .iter()
                .all(|(m, _)| !m.eq_ignore_ascii_case(n)));
            assert!(c.param(n).is_some());
        }
    }
    if let Some(b) = bearer(challenges) {
        let _ = (
            b.scopes().count(),
            b.is_insufficient_scope(),
            b.is_invalid_token(),
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn never_panics_on_arbitrary_text(values in prop::collection::vec(any::<String>(), 0..4)) {
        let parsed = parse_challenges(values.iter().map(String::as_str));
        if let Ok(c) = &parsed {
            check_invariants(c);
        }
        if let Err(e) = &parsed {
            prop_assert!(!e.to_string().is_empty());
        }
    }

    #[test]
    fn never_panics_on_grammar_like_text(values in prop::collection::vec(GRAMMAR_ALPHABET, 0..4)) {
        let parsed = parse_challenges(values.iter().map(String::as_str));
        match &parsed {
            Ok(c) => check_invariants(c),
            Err(e) => {
                if let Some((value, offset)) = e.position() {
                    prop_assert!(value < values.len());
                    prop_assert!(offset <= values[value].len());
                }
            }
        }
    }

    #[test]
    fn values_are_parsed_independently(values in prop::collection::vec(GRAMMAR_ALPHABET, 0..4)) {
        let together = parse_challenges(values.iter().map(String::as_str));
        let one_by_one: Result<Vec<Challenge>, ()> = values
            .iter()
            .map(|v| parse_challenges([v.as_str()]).map_err(drop))
            .collect::<Result<Vec<_>, _>>()
            .map(|lists| lists.into_iter().flatten().collect());
        prop_assert_eq!(together.ok(), one_by_one.ok());
    }

    #[test]
    fn rendered_challenges_round_trip(
        values in prop::collection::vec(prop::collection::vec(challenge_strategy(), 0..4), 1..4),
        style in prop::collection::vec(any::<u8>(), 1..64),
    ) {
        let rendered = render(&values, &style);
        let parsed = parse_challenges(rendered.iter().map(String::as_str));
        let expected: Vec<Challenge> = values.into_iter().flatten().collect();
        prop_assert_eq!(parsed, Ok(expected), "rendered as {:?}", rendered);
    }
}
