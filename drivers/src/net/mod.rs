//! The HTTP stacks both the MCP client and the tunnel drive: ureq agents and a bounded thread
//! pool for the blocking driver, hyper 1 on smol's sockets with a keep-alive pool for smol;
//! and the DNS rebinding defence for the fetches the core guards (`guard`).

pub(crate) mod guard;
#[cfg(feature = "smol")]
pub(crate) mod hyper_smol;
#[cfg(feature = "blocking")]
pub(crate) mod threads;
pub mod tls;
#[cfg(feature = "blocking")]
pub(crate) mod ureq;
