// The traces layer's kernels as Python sees them: ddflow._native.traces (thin: one line a kernel).
// Besides the kernels Python calls, the helpers other layers' kernels call, bound for their tests.
#include <nanobind/stl/pair.h>
#include <nanobind/stl/tuple.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "base/convert.hpp"
#include "traces/arena.hpp"
#include "traces/layout.hpp"
#include "traces/merge.hpp"

namespace nb = nanobind;

namespace ddflow {

namespace {
// histories' precondition, checked where Python calls it: groups' columns sorted and unique.  O(ng G).
void check_groups(Mat<const i64> groups) {
    for (i64 g = 1; g < groups.cols; ++g) {
        int c = 0;
        for (i64 j = 0; j < groups.rows && !c; ++j)
            if (groups(j, g) != groups(j, g - 1)) c = groups(j, g) < groups(j, g - 1) ? -1 : 1;
        if (c <= 0) throw std::invalid_argument("histories: the groups (columns of groups) must be sorted and unique");
    }
}

// merge_rows' preconditions, checked where Python calls it (merge_pair's rows come from tries, sorted by
// construction): each side's rows sorted and unique, each row's times sorted.  O(n m + u d).
template <class O>
void check_sorted_side(const char* side, Mat<const i64> K, Vec<const O> off, Mat<const i64> t) {
    for (i64 i = 1; i < K.rows; ++i)
        if (row_cmp(K.row(i - 1), K.row(i), K.cols) >= 0)
            throw std::invalid_argument(std::string("merge_rows: the rows of K") + side + " must be sorted and unique");
    for (i64 i = 0; i + 1 < off.n; ++i)  // within t whatever the offsets (merge_rows checks those)
        for (i64 u = std::max<i64>(off[i], 0) + 1; u < std::min<i64>(off[i + 1], t.rows); ++u)
            if (row_cmp(t.row(u - 1), t.row(u), t.cols) > 0)
                throw std::invalid_argument(std::string("merge_rows: the times of each row of ") + side +
                                            " must be sorted");
}

template <class OA, class OB>
MergedRows merge_rows_checked(Mat<const i64> KA, Vec<const OA> offA, Mat<const i64> tA, Vec<const i64> dA,
                              Mat<const i64> KB, Vec<const OB> offB, Mat<const i64> tB, Vec<const i64> dB,
                              Mat<const i64> F) {
    check_sorted_side("A", KA, offA, tA);
    check_sorted_side("B", KB, offB, tB);
    return merge_rows<OA, OB>(KA, offA, tA, dA, KB, offB, tB, dB, F);
}
}  // namespace

void bind_traces(nb::module_ m) {
    auto nogil = nb::call_guard<nb::gil_scoped_release>();
    // layout.py
    m.def("trie_with_row", &trie_with_row, nogil);
    m.def("seek_table_within", &seek_table_within, nogil);
    m.def("histories", [](Mat<const i64> T, Mat<const i64> groups, i64 arity, i64 depth) {
        check_groups(groups);
        return histories(T, groups, arity, depth);
    }, nogil);
    m.def("build_trie", [](Mat<const i64> K, Mat<const i64> times, Vec<const i64> diffs) {
        return build_trie(K, times, diffs);
    }, nogil);
    m.def("trie_row", &trie_row, nogil);
    m.def("key_positions", &key_positions, nogil);
    m.def("gather_found", &gather_found, nogil);
    m.def("find_key", &find_key, nogil);
    m.def("lower_bound_from", &lower_bound_from, nogil);
    m.def("value_range", &value_range, nogil);
    m.def("order_by_time", &order_by_time, nogil);
    // merge.py
    m.def("merge_rows", &merge_rows_checked<i32, i32>, nogil);
    m.def("merge_rows", &merge_rows_checked<i64, i64>, nogil);
    m.def("merge_rows", &merge_rows_checked<i32, i64>, nogil);
    m.def("merge_rows", &merge_rows_checked<i64, i32>, nogil);
    m.def("merge_pair", &merge_pair, nogil);
    m.def("merge_table", &merge_table, nogil);
    m.def("sum_overflows", &sum_overflows);
    m.def("sort_segment", &sort_segment, nogil);
    m.def("consolidate_segment", &consolidate_segment, nogil);
    // arena.py
    m.def("arena_insert", &arena_insert, nogil);
    m.def("insert_fields", &insert_fields, nogil);
    m.def("write_trie", &write_trie, nogil);
    m.def("words_for", &words_for);
    m.def("has_room", &has_room);
}

}  // namespace ddflow
