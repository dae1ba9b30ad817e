#if canImport(Glibc)
import Glibc
#endif
import ArgumentParser
import Foundation
import ServerCLI
import VaultCrypto

/// `vault serve`: runs the sidecar executable `vault-sidecar`, installed beside `vault`, in this
/// process (execv) with the same arguments, so the running sidecar never maps the code that opens
/// envelopes that this executable links (docs/threat-model.md). The arguments are parsed here
/// first, with the same option groups, so `vault serve --help` and usage errors are as before.
struct Serve: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve", abstract: SidecarCommand.abstract, discussion: SidecarCommand.discussion)

    @OptionGroup var file: ConfigOption<SidecarSettings>
    @OptionGroup var socket: SocketOptions<SidecarSettings>
    @OptionGroup var store: StoreOption<SidecarSettings>
    @OptionGroup var keys: KeysOption<SidecarSettings>
    @OptionGroup var sidecar: SidecarOptions
    @OptionGroup var logging: LoggingOptions<SidecarSettings>

    var options: ServeOptions {
        ServeOptions(file: file, socket: socket, store: store, keys: keys, sidecar: sidecar, logging: logging)
    }

    /// `vault-sidecar` in the directory of the running `vault`.
    static var sidecarExecutable: String {
        let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? Bundle.main.executablePath ?? CommandLine.arguments[0]
        return URL(fileURLWithPath: exe).deletingLastPathComponent().appendingPathComponent("vault-sidecar").path
    }

    func run() throws {
        let path = Self.sidecarExecutable
        // vault's own arguments end at the subcommand's name (the root command takes none but
        // --help and --version, which never reach here).
        let arguments = CommandLine.arguments.firstIndex(of: "serve").map { Array(CommandLine.arguments[($0 + 1)...]) } ?? []
        let argv = ([path] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        execv(path, argv)
        let reason = String(cString: strerror(errno))
        throw fail(VaultError(.ioError, "cannot run the sidecar executable \(path) (installed beside vault): \(reason)"))
    }
}
