import Foundation
import VaultCrypto

extension EventRecord {
    /// The event as a webhook delivers it (docs/events.md): `{"id","object":"event","type",
    /// "created_at","data":{"object":{…}}}`. The same bytes on every attempt of one event.
    public var json: String {
        var out = "{\"id\":"
        JSONText.appendString(id, to: &out)
        out += ",\"object\":\"event\",\"type\":"
        JSONText.appendString(type, to: &out)
        out += ",\"created_at\":\"\(JSONText.iso(createdAt))\",\"data\":{\"object\":\(data)}}"
        return out
    }

    /// The event as `GET /v1/events` shows it: the delivered JSON and its `delivery`.
    public var apiJSON: String {
        var out = String(json.dropLast())
        out += ",\"delivery\":{\"status\":\"\(delivery.delivered ? "delivered" : "pending")\",\"attempts\":\(delivery.attempts)"
        func time(_ key: String, _ d: Date?) {
            out += ",\"\(key)\":" + (d.map { "\"\(JSONText.iso($0))\"" } ?? "null")
        }
        time("last_attempt_at", delivery.lastAttemptAt)
        out += ",\"last_status\":" + (delivery.lastStatus.map(String.init) ?? "null")
        out += ",\"last_error\":"
        if let e = delivery.lastError { JSONText.appendString(e, to: &out) } else { out += "null" }
        time("next_attempt_at", delivery.delivered || delivery.attempts == 0 ? nil : delivery.nextAttemptAt)
        time("delivered_at", delivery.deliveredAt)
        out += "}}"
        return out
    }
}
