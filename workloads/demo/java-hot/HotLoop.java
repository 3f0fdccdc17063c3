/// A JVM target for switchyard's JIT tests: one hot method, called from main for a given
/// number of seconds (the first argument, 3 by default), so nearly every on-CPU sample is in
/// `HotLoop.spin` once the JIT has compiled it.
public class HotLoop {
    /// Integer mixing the JIT cannot fold away: the result is printed.
    static long spin(long seed, int rounds) {
        long x = seed;
        for (int i = 0; i < rounds; i++) {
            x ^= x << 13;
            x ^= x >>> 7;
            x ^= x << 17;
        }
        return x;
    }

    public static void main(String[] args) {
        double seconds = args.length > 0 ? Double.parseDouble(args[0]) : 3.0;
        long end = System.nanoTime() + (long) (seconds * 1e9);
        long acc = 1;
        while (System.nanoTime() < end) {
            acc = spin(acc, 1_000_000);
        }
        System.out.println(acc);
    }
}
