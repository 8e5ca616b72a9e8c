//! The blocking server driver: std threads.

#[allow(dead_code)]
mod http;
