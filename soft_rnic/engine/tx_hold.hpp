// A scope that holds a transport's transmit batch: frames queued meanwhile wait, and the batch
// leaves (Owner::flush_tx) when the outermost hold ends. A receive round, a pump or the doorbell
// holds it, so one round's frames leave together (one system call per run to a peer). Owner has
// a counter tx_hold_ and flush_tx(), and makes TxHold<Owner> a friend.
#pragma once

namespace softrnic::engine {

template <class Owner>
class TxHold {
 public:
  explicit TxHold(Owner& o) : o_(o) { ++o_.tx_hold_; }
  ~TxHold() {
    if (--o_.tx_hold_ == 0) o_.flush_tx();
  }
  TxHold(const TxHold&) = delete;
  TxHold& operator=(const TxHold&) = delete;

 private:
  Owner& o_;
};

}  // namespace softrnic::engine
