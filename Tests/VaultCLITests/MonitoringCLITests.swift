import Foundation
import Testing

/// deploy/monitoring against docs/metrics.md, by Tests/Interop/monitoring_check.py: the alert
/// rules pass `promtool check rules` and their unit tests (`promtool test rules alerts_test.yml`:
/// stuck payments, unknown payments, a failed reload, key age, audit failures), the Grafana
/// dashboard has the shape Grafana needs (a JSON schema: title, panels, schemaVersion; each panel
/// a type, a title and targets with an `expr`, each parsing as PromQL), and every expression of
/// either names only documented families.
@Suite(.ownThread) struct MonitoringCLITests {
    /// Debian's `prometheus` package (scripts/setup installs it) puts promtool here.
    static let promtool = ["/usr/bin/promtool", "/usr/local/bin/promtool", "/bin/promtool"].first {
        FileManager.default.isExecutableFile(atPath: $0)
    }

    func check(_ arguments: [String]) throws -> RunResult {
        let script = repositoryRoot.appendingPathComponent("Tests/Interop/monitoring_check.py").path
        let r = try run(python, ["python3", script, repositoryRoot.path] + arguments)
        #expect(r.status == 0, "\(r.out)\n\(r.stderr)")
        #expect(r.out.contains(" checks, 0 problems"), "\(r.out)")
        return r
    }

    @Test func theDashboardAndTheRulesUseOnlyDocumentedFamilies() throws {
        let r = try check([])
        #expect(r.out.contains("dashboard: ") && r.out.contains("alerts: 14 rules"), "\(r.out)")
    }

    @Test(.enabled(if: promtool != nil, "promtool is absent: install Debian's prometheus package (scripts/setup does)"))
    func theAlertRulesPassPromtoolAndTheirUnitTests() throws {
        let r = try check([try #require(Self.promtool)])
        #expect(r.out.contains("promtool check rules alerts.yml: exit 0"), "\(r.out)")
        #expect(r.out.contains("promtool test rules alerts_test.yml: exit 0"), "\(r.out)")
        #expect(r.out.contains("promtool check rules (dashboard expressions): exit 0"), "\(r.out)")
    }
}
