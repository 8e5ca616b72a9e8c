//! Drivers for mcpwire-core: they move bytes, spawn processes and read clocks, and make no
//! protocol decisions. The blocking (ureq, std threads) and smol drivers land with the next issue.
#![forbid(unsafe_code)]
