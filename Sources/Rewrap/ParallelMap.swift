import Dispatch

/// `items` mapped by `transform`, the work split into `workers` contiguous chunks run on
/// `DispatchQueue.concurrentPerform` (the rewraps' crypto: opening and sealing, one CPU-bound call
/// per row); results in the items' order.
public func parallelMap<T: Sendable, R>(_ items: [T], workers: Int, placeholder: R, _ transform: @Sendable (T) -> R) -> [R] {
    guard !items.isEmpty else { return [] }
    let results = UnsafeMutableBufferPointer<R>.allocate(capacity: items.count)
    results.initialize(repeating: placeholder)
    defer { results.deinitialize().deallocate() }
    let n = max(1, min(workers, items.count))
    let chunk = (items.count + n - 1) / n
    nonisolated(unsafe) let out = results
    DispatchQueue.concurrentPerform(iterations: n) { w in
        let lo = w * chunk, hi = min(items.count, lo + chunk)
        guard lo < hi else { return }
        for i in lo..<hi { out[i] = transform(items[i]) }
    }
    return Array(results)
}
