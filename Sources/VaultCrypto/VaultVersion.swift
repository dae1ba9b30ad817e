/// The vault's version: `vault --version`, `vault-sidecar --version` and both servers' start-up
/// log line.
public enum VaultVersion {
    public static let string = "0.1.0"
}
