//! A real `redis-server` that also listens for TLS on a loopback port, with a certificate for
//! `127.0.0.1` signed by a certificate authority made for the test with the `openssl` command,
//! and stopped by PID when dropped. The plain port stays open, for the test's own look at
//! what was stored.

use std::path::PathBuf;
use std::process::Command;

use super::redis_server::{RedisServer, free_port};

pub struct RedisTls {
    server: RedisServer,
    tls_port: u16,
    /// The certificates and keys.
    dir: PathBuf,
}

impl RedisTls {
    pub fn start() -> Self {
        let tls_port = free_port();
        let dir = std::env::temp_dir().join(format!(
            "petstore-client-tls-{}-{tls_port}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).expect("the certificates' directory is made");
        std::fs::write(
            dir.join("server.ext"),
            "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n\
             extendedKeyUsage=serverAuth\n",
        )
        .unwrap();
        let key = [
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
        ];
        openssl(
            &dir,
            &[
                &["req", "-x509"],
                &key[..],
                &[
                    "-keyout",
                    "ca.key",
                    "-out",
                    "ca.crt",
                    "-subj",
                    "/CN=petstore-client test CA",
                    "-days",
                    "2",
                ],
            ],
        );
        openssl(
            &dir,
            &[
                &["req"],
                &key[..],
                &[
                    "-keyout",
                    "server.key",
                    "-out",
                    "server.csr",
                    "-subj",
                    "/CN=127.0.0.1",
                ],
            ],
        );
        openssl(
            &dir,
            &[&[
                "x509",
                "-req",
                "-in",
                "server.csr",
                "-CA",
                "ca.crt",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-out",
                "server.crt",
                "-days",
                "2",
                "-extfile",
                "server.ext",
            ]],
        );
        let file = |name: &str| dir.join(name).display().to_string();
        let server = RedisServer::start_with(&[
            "--tls-port",
            &tls_port.to_string(),
            "--tls-cert-file",
            &file("server.crt"),
            "--tls-key-file",
            &file("server.key"),
            "--tls-ca-cert-file",
            &file("ca.crt"),
            // The server's certificate is what is tested; clients present none.
            "--tls-auth-clients",
            "no",
        ]);
        Self {
            server,
            tls_port,
            dir,
        }
    }

    /// `rediss://127.0.0.1:TLS_PORT/`.
    pub fn tls_url(&self) -> String {
        format!("rediss://127.0.0.1:{}/", self.tls_port)
    }

    /// The plain `redis://` URL of the same server.
    pub fn url(&self) -> String {
        self.server.url()
    }

    /// The certificate authority that signed the server's certificate, in PEM.
    pub fn ca_certificate(&self) -> Vec<u8> {
        std::fs::read(self.dir.join("ca.crt")).expect("the CA certificate")
    }
}

impl Drop for RedisTls {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn openssl(dir: &std::path::Path, args: &[&[&str]]) {
    let output = Command::new("openssl")
        .args(args.concat())
        .current_dir(dir)
        .output()
        .unwrap_or_else(|error| {
            panic!("cannot run openssl ({error}): install the Debian package openssl; .ci/run does")
        });
    assert!(
        output.status.success(),
        "openssl {:?} failed: {}",
        args.concat(),
        String::from_utf8_lossy(&output.stderr)
    );
}
