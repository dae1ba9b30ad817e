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
}
