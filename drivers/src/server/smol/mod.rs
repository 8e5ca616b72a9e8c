//! The smol server driver: hyper's server on smol.

#[allow(dead_code)]
mod http;
