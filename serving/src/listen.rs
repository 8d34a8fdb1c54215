//! Binding a TCP listener with a deep accept queue: under a flood of connections the accept
//! loop can fall behind for a moment, and a full queue drops the SYNs of everyone else, whose
//! kernels retry only after a second. The kernel caps the depth at `net.core.somaxconn`.

use std::net::SocketAddr;

use tokio::net::{TcpListener, TcpSocket};

/// The accept queue asked for (tokio's default is 1,024).
pub const BACKLOG: u32 = 4096;

/// A listener on `addr` (address reuse on, as a restarted server needs) with [`BACKLOG`].
pub fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(BACKLOG)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn binds_a_port_the_kernel_picks_and_accepts() {
        let listener = bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = listener.local_addr().unwrap();
        assert_ne!(addr.port(), 0);
        let client = tokio::net::TcpStream::connect(addr);
        let (accepted, connected) = tokio::join!(listener.accept(), client);
        assert!(accepted.is_ok() && connected.is_ok());
    }
}
