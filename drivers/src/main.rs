//! The `mcpwire` command.

fn main() {
    println!(
        "mcpwire {}: the tunnel and MCP client drivers are not built yet (see README.md).",
        env!("CARGO_PKG_VERSION")
    );
}
