//! How many tokens tool definitions take in the model's context, estimated.
//!
//! The method: the length in bytes of the compact JSON the model would get for the tool (the
//! Anthropic Messages API shape `{"description":…,"input_schema":…,"name":…}`, as
//! [`super::present::ToolDefinition::anthropic`] writes it, without `defer_loading`), divided
//! by [`BYTES_PER_TOKEN`] and rounded up. Four bytes a token is the usual rule of thumb for
//! English text and JSON with the providers' tokenizers; it is an estimate for choosing how to
//! present tools, not a count to bill by. The total is the sum over the catalog's tools.

/// Bytes per token in the estimate.
pub const BYTES_PER_TOKEN: u64 = 4;

/// The estimate for a definition of `bytes` bytes.
pub fn tokens_for_bytes(bytes: u64) -> u64 {
    bytes.div_ceil(BYTES_PER_TOKEN)
}

/// The token estimate of a catalog's definitions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TokenEstimate {
    /// How many tools.
    pub tools: usize,
    /// Their definitions' bytes, all together.
    pub bytes: u64,
    /// The sum of each tool's estimate.
    pub tokens: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn four_bytes_a_token_rounded_up() {
        assert_eq!(tokens_for_bytes(0), 0);
        assert_eq!(tokens_for_bytes(1), 1);
        assert_eq!(tokens_for_bytes(4), 1);
        assert_eq!(tokens_for_bytes(5), 2);
        assert_eq!(tokens_for_bytes(400), 100);
    }
}
