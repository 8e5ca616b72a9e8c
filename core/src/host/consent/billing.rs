//! Whether a tool's calls may spend money. MCP has no annotation for it, so the policy knows it
//! two ways:
//!
//! - the user tags the tool (a `billing` rule, see [`super::rules`]): certain;
//! - a keyword heuristic (here): a word of the tool's name or title that is a verb of paying
//!   or ordering ([`NAME_WORDS`]: `pay`, `purchase`, `buy`, `charge`, `checkout`, `order`,
//!   `transfer`, `subscribe`, `refund`, `withdraw`, `payout`, `donate`, `invoice`, `bill`),
//!   or a word of its description that only money talk uses ([`DESCRIPTION_WORDS`]:
//!   `payment`, `purchase`, `billing`, `checkout`, `refund`, `payout`, and their plurals, and
//!   the phrase `credit card`).
//!
//! Words are whole words: names are split on `_`, `-`, `.`, spaces and camelCase humps
//! (`createPaymentIntent` is `create payment intent`), all lower-cased; so `display` is not
//! `pay` and `list_orders` is not `order`, but `get_order` is. The heuristic errs both ways:
//! it flags a read-only `get_order` (an `allow` rule naming the tool lets it through) and
//! misses a `confirm` that charges a card (tag it). The description list is short on purpose:
//! prose says "in order to" and "transfer files" all the time.

use crate::mcp::results::Tool;

/// Words of a tool's name or title that mark it as billing.
pub const NAME_WORDS: &[&str] = &[
    "pay",
    "payment",
    "purchase",
    "buy",
    "charge",
    "checkout",
    "order",
    "transfer",
    "subscribe",
    "refund",
    "withdraw",
    "payout",
    "donate",
    "invoice",
    "bill",
];

/// Words (or phrases of words) of a tool's description that mark it as billing.
pub const DESCRIPTION_WORDS: &[&str] = &[
    "payment",
    "payments",
    "purchase",
    "purchases",
    "billing",
    "checkout",
    "refund",
    "refunds",
    "payout",
    "payouts",
    "credit card",
];

/// Where a billing keyword was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum KeywordLocation {
    /// The tool's name.
    Name,
    /// Its title (or its annotations' title).
    Title,
    /// Its description.
    Description,
}

/// The first billing keyword of `tool`: name, then title, then description.
pub fn keyword(tool: &Tool) -> Option<(&'static str, KeywordLocation)> {
    let in_words = |text: &str, list: &'static [&'static str]| {
        let ws = words(text);
        list.iter().copied().find(|phrase| {
            let p: Vec<&str> = phrase.split(' ').collect();
            ws.windows(p.len())
                .any(|w| w.iter().map(String::as_str).eq(p.iter().copied()))
        })
    };
    if let Some(k) = in_words(&tool.name, NAME_WORDS) {
        return Some((k, KeywordLocation::Name));
    }
    let titles = [
        tool.title.as_deref(),
        tool.annotations.as_ref().and_then(|a| a.title.as_deref()),
    ];
    for title in titles.into_iter().flatten() {
        if let Some(k) = in_words(title, NAME_WORDS) {
            return Some((k, KeywordLocation::Title));
        }
    }
    let k = in_words(tool.description.as_deref()?, DESCRIPTION_WORDS)?;
    Some((k, KeywordLocation::Description))
}

/// The lower-cased words of `text`: runs of letters and digits, also split where a lower-case
/// letter or digit meets an upper-case one (`createPayment`) and before the last capital of a
/// run followed by a lower-case letter (`HTTPRequest` is `http request`).
fn words(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut word = String::new();
    for (i, &c) in chars.iter().enumerate() {
        if !c.is_alphanumeric() {
            if !word.is_empty() {
                out.push(std::mem::take(&mut word));
            }
            continue;
        }
        let prev = i.checked_sub(1).and_then(|p| chars.get(p)).copied();
        let next = chars.get(i + 1).copied();
        let hump = c.is_uppercase()
            && match prev {
                Some(p) if p.is_lowercase() || p.is_numeric() => true,
                Some(p) if p.is_uppercase() => next.is_some_and(char::is_lowercase),
                _ => false,
            };
        if hump && !word.is_empty() {
            out.push(std::mem::take(&mut word));
        }
        word.extend(c.to_lowercase());
    }
    if !word.is_empty() {
        out.push(word);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::results::ToolAnnotations;

    fn tool(name: &str, title: Option<&str>, description: Option<&str>) -> Tool {
        Tool {
            name: name.into(),
            title: title.map(Into::into),
            description: description.map(Into::into),
            ..Tool::default()
        }
    }

    #[test]
    fn words_split_on_separators_and_humps() {
        assert_eq!(
            words("createPaymentIntent"),
            ["create", "payment", "intent"]
        );
        assert_eq!(
            words("HTTPRequest_v2.send-now"),
            ["http", "request", "v2", "send", "now"]
        );
        assert_eq!(words("buy2Items"), ["buy2", "items"]);
        assert!(words("__").is_empty());
    }

    #[test]
    fn names_titles_and_descriptions_are_looked_at_as_whole_words() {
        use KeywordLocation::*;
        assert_eq!(
            keyword(&tool("create_charge", None, None)),
            Some(("charge", Name))
        );
        assert_eq!(
            keyword(&tool("placeOrder", None, None)),
            Some(("order", Name))
        );
        assert_eq!(
            keyword(&tool("send", Some("Transfer funds"), None)),
            Some(("transfer", Title))
        );
        assert_eq!(
            keyword(&tool("confirm", None, Some("Completes the checkout."))),
            Some(("checkout", Description))
        );
        assert_eq!(
            keyword(&tool("save", None, Some("Stores a Credit Card on file"))),
            Some(("credit card", Description))
        );
        let mut t = tool("go", None, None);
        t.annotations = Some(ToolAnnotations {
            title: Some("Buy now".into()),
            ..ToolAnnotations::default()
        });
        assert_eq!(keyword(&t), Some(("buy", Title)));
        for quiet in [
            tool("display", None, None),
            tool("list_orders", None, None),
            tool("reorder", None, None),
            tool(
                "copy",
                None,
                Some("Copies files in order to transfer them."),
            ),
            tool("search", None, Some("Full-text search.")),
        ] {
            assert_eq!(keyword(&quiet), None, "{}", quiet.name);
        }
    }
}
