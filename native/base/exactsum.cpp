// Exact float sums: see exactsum.hpp, and ddflow/base/exactsum.py for the reference of each.
#include "base/exactsum.hpp"

#include <cmath>
#include <limits>
#include <stdexcept>

namespace ddflow {

std::tuple<Array<i64>, Array<i64>, Array<i64>> float_limbs(Vec<const double> x) {
    const i64 n = x.n;
    Array<i64> row(4 * n), slot(4 * n), val(4 * n);
    constexpr i64 mask = ((i64)1 << LIMB_BITS) - 1;
    i64 w = 0;
    auto put = [&](i64 r, i64 s, i64 v) {
        row[w] = r;
        slot[w] = s;
        val[w] = v;
        ++w;
    };
    for (i64 r = 0; r < n; ++r) {
        double v = x[r];
        if (v != v) {
            put(r, 0, 1);
            continue;
        }
        if (v == 0.0) continue;
        if (std::isinf(v)) {
            put(r, v > 0 ? 1 : 2, 1);
            continue;
        }
        i64 sign = 1;
        if (v < 0) sign = -1, v = -v;
        int e;
        const double m = std::frexp(v, &e);  // v = m * 2**e, 0.5 <= m < 1
        i64 mant = (i64)std::ldexp(m, 53);    // exact: 53 bits
        i64 p = e - 53 + 1074;                // bit position of mant's lowest bit, counted from 2**-1074
        if (p < 0) {                          // a subnormal: its low bits are zeros
            mant >>= -p;
            p = 0;
        }
        i64 i = p / LIMB_BITS;
        const i64 off = p - LIMB_BITS * i;
        i64 low = (mant & (((i64)1 << (LIMB_BITS - off)) - 1)) << off;
        i64 rest = mant >> (LIMB_BITS - off);
        while (true) {
            if (low) put(r, FIRST_LIMB + i, sign * low);
            if (rest == 0) break;
            ++i;
            low = rest & mask;
            rest >>= LIMB_BITS;
        }
    }
    row.truncate(w);
    slot.truncate(w);
    val.truncate(w);
    return {std::move(row), std::move(slot), std::move(val)};
}

Array<double> round_limbs(Mat<const i64> sums, Vec<const i64> subs) {
    const i64 R = sums.rows, S = sums.cols;
    if (subs.n != S) throw std::invalid_argument("round_limbs: subs must name the slot of each column of sums");
    for (i64 s = 0; s < S; ++s)
        if (subs[s] < 0 || subs[s] >= SLOTS)
            throw std::invalid_argument("round_limbs: a slot in subs is outside 0..SLOTS-1");
    constexpr i64 mask = ((i64)1 << LIMB_BITS) - 1;
    const double inf = std::numeric_limits<double>::infinity();
    Array<double> out = filled<double>(R, 0.0);
    i64 raw[LIMBS], limb[LIMBS];
    for (i64 r = 0; r < R; ++r) {
        i64 nan = 0, pinf = 0, ninf = 0;
        for (i64 i = 0; i < LIMBS; ++i) raw[i] = 0;
        for (i64 s = 0; s < S; ++s) {
            const i64 c = subs[s];
            if (c == 0) nan = sums(r, s);
            else if (c == 1) pinf = sums(r, s);
            else if (c == 2) ninf = sums(r, s);
            else raw[c - FIRST_LIMB] = sums(r, s);
        }
        if (nan != 0 || (pinf != 0 && ninf != 0)) {
            out[r] = std::numeric_limits<double>::quiet_NaN();
            continue;
        }
        if (pinf != 0) {
            out[r] = inf;
            continue;
        }
        if (ninf != 0) {
            out[r] = -inf;
            continue;
        }
        // Normalize with carries: (v & mask) + carry and the shifted parts stay far inside int64.
        i64 carry = 0;
        for (i64 i = 0; i < LIMBS; ++i) {
            const i64 v = raw[i];
            const i64 t = (v & mask) + carry;
            limb[i] = t & mask;
            carry = (v >> LIMB_BITS) + (t >> LIMB_BITS);
        }
        double sign = 1.0;
        if (carry < 0) {  // V = carry * 2**2112 + L: -V = (-carry - 1) * 2**2112 + (2**2112 - L)
            sign = -1.0;
            i64 c = 1;
            for (i64 i = 0; i < LIMBS; ++i) {
                const i64 t = (mask - limb[i]) + c;
                limb[i] = t & mask;
                c = t >> LIMB_BITS;
            }
            carry = -carry - 1 + c;
        }
        if (carry > 0) {  // at least 2**(2112 - 1074): past every double
            out[r] = sign * inf;
            continue;
        }
        i64 h = LIMBS - 1;
        while (h >= 0 && limb[h] == 0) --h;
        if (h < 0) {
            out[r] = 0.0;
            continue;
        }
        // acc: the top 62 bits (fewer if that is all there is); base: the power of two of acc's lowest bit.
        i64 acc = 0, i = h;
        while (i >= 0 && acc < ((i64)1 << 38)) {
            acc = (acc << LIMB_BITS) | limb[i];
            --i;
        }
        i64 base = LIMB_BITS * (i + 1);
        if (i >= 0) {
            i64 bl = 0;
            while ((acc >> bl) > 0) ++bl;
            const i64 k = 62 - bl;  // bits still to take from limb i (0 <= k < 24)
            bool sticky;
            if (k > 0) {
                acc = (acc << k) | (limb[i] >> (LIMB_BITS - k));
                base = LIMB_BITS * i + (LIMB_BITS - k);
                sticky = (limb[i] & (((i64)1 << (LIMB_BITS - k)) - 1)) != 0;
            } else {
                sticky = limb[i] != 0;
            }
            for (i64 j = i - 1; !sticky && j >= 0; --j) sticky = limb[j] != 0;
            if (sticky) acc |= 1;
        }
        const double f = (double)acc;  // rounded to nearest-even; then scaled exactly, or past every double
        int e;
        std::frexp(f, &e);
        if (e + base - 1074 > 1024) out[r] = sign * inf;
        else out[r] = sign * std::ldexp(f, (int)(base - 1074));
    }
    return out;
}

}  // namespace ddflow
