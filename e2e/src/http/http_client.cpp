// libcurl-multi implementation of HttpClient: queueing, retries with backoff, SSE parsing.
#include "http/http_client.hpp"

#include "http/process_setup.hpp"
#include "http/stop_signals.hpp"

#include "common/splitmix64.hpp"

#include <curl/curl.h>
#include <strings.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <map>
#include <mutex>
#include <stdexcept>
#include <unordered_map>

namespace dsv4::eval {

namespace {

void global_init() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
      throw std::runtime_error("curl_global_init failed");
  });
}

struct Transfer {
  uint64_t id = 0;
  HttpRequest req;
  HttpResult res;
  CURL* easy = nullptr;
  curl_slist* headers = nullptr;
  char errbuf[CURL_ERROR_SIZE] = {0};
  bool status_known = false;
  bool stream_mode = false;  // parsing SSE on this attempt
  bool cancelled = false;
  bool done = false;     // final result decided (success, failure or cancellation)
  std::string sse_buf;   // bytes not yet split into lines
  std::string sse_data;  // data lines of the event being assembled
  bool sse_has_data = false;
  std::string event_error;
  double retry_after_s = -1;
  double due_s = 0;
};

enum class Where { kQueued, kDelayed, kRunning, kFinished };

}  // namespace

struct HttpClient::Impl {
  HttpClientOptions opt;
  CURLM* multi = nullptr;
  uint64_t next_id = 1;
  SplitMix64 rng{0};
  std::unordered_map<uint64_t, std::unique_ptr<Transfer>> all;
  std::deque<Transfer*> queue;               // waiting for a slot, retries first
  std::multimap<double, Transfer*> delayed;  // waiting for their backoff to expire
  std::deque<Transfer*> finished;            // final, on_done not yet called
  std::vector<CURL*> pool;                   // reusable easy handles
  size_t n_running = 0;
  HttpCounters counters;

  double jitter_factor() {
    const double u = rng.uniform();
    return 1.0 + opt.jitter * (2 * u - 1);
  }

  void dispatch_event(Transfer* t) {
    if (!t->sse_has_data) return;
    SseEvent ev;
    ev.data = std::move(t->sse_data);
    ev.t = monotonic_seconds();
    ev.attempt = t->res.attempts;
    t->sse_data.clear();
    t->sse_has_data = false;
    ++t->res.events;
    if (ev.data == "[DONE]") t->res.saw_done = true;
    if (t->req.on_event && t->event_error.empty()) t->event_error = t->req.on_event(ev);
  }

  // Splits complete lines out of sse_buf; returns false to abort the transfer.
  bool parse_sse(Transfer* t) {
    size_t pos = 0;
    std::string& b = t->sse_buf;
    while (true) {
      const size_t nl = b.find('\n', pos);
      if (nl == std::string::npos) break;
      size_t end = nl;
      if (end > pos && b[end - 1] == '\r') --end;
      const std::string_view line(b.data() + pos, end - pos);
      pos = nl + 1;
      if (line.empty()) {
        dispatch_event(t);
      } else if (line.substr(0, 5) == "data:") {
        std::string_view v = line.substr(5);
        if (!v.empty() && v[0] == ' ') v.remove_prefix(1);
        if (t->sse_has_data) t->sse_data.push_back('\n');
        t->sse_data.append(v);
        t->sse_has_data = true;
      }  // comments (":...") and other fields (event:, id:, retry:) are ignored
      if (!t->event_error.empty()) return false;
    }
    b.erase(0, pos);
    return true;
  }

  static size_t on_write(char* p, size_t size, size_t n, void* ud) {
    auto* t = static_cast<Transfer*>(ud);
    const size_t len = size * n;
    if (t->res.first_byte_s == 0) t->res.first_byte_s = monotonic_seconds();
    if (!t->status_known) {
      long code = 0;
      curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &code);
      t->res.status = code;
      t->status_known = true;
      t->stream_mode = t->req.sse && code >= 200 && code < 300;
    }
    if (!t->stream_mode) {
      t->res.body.append(p, len);
      return len;
    }
    t->sse_buf.append(p, len);
    Impl* self = nullptr;
    curl_easy_getinfo(t->easy, CURLINFO_PRIVATE, &self);
    return self->parse_sse(t) ? len : 0;
  }

  // libcurl's trace (HttpClientOptions::verbose) on stderr: text and headers only, an
  // Authorization header's value and every registered secret written as ***.
  static int on_debug(CURL*, curl_infotype type, char* data, size_t size, void*) {
    if (type != CURLINFO_TEXT && type != CURLINFO_HEADER_IN && type != CURLINFO_HEADER_OUT)
      return 0;
    std::string text(data, size), out;
    size_t pos = 0;
    while (pos < text.size()) {
      size_t nl = text.find('\n', pos);
      if (nl == std::string::npos) nl = text.size() - 1;
      std::string line = text.substr(pos, nl + 1 - pos);
      if (strncasecmp(line.c_str(), "authorization:", 14) == 0)
        line = line.substr(0, 14) + " ***" + (line.back() == '\n' ? "\n" : "");
      out += line;
      pos = nl + 1;
    }
    const char* tag = type == CURLINFO_HEADER_OUT ? "> " : type == CURLINFO_HEADER_IN ? "< " : "* ";
    std::fprintf(stderr, "%s%s", tag, redact(out).c_str());
    return 0;
  }

  static size_t on_header(char* p, size_t size, size_t n, void* ud) {
    auto* t = static_cast<Transfer*>(ud);
    const size_t len = size * n;
    static constexpr char kKey[] = "retry-after:";
    if (len > sizeof(kKey) - 1 && strncasecmp(p, kKey, sizeof(kKey) - 1) == 0) {
      const std::string v(p + sizeof(kKey) - 1, len - (sizeof(kKey) - 1));
      char* end = nullptr;
      const double s = std::strtod(v.c_str(), &end);
      if (end != v.c_str() && std::isfinite(s) && s >= 0) t->retry_after_s = s;
    }
    return len;
  }

  Impl(HttpClientOptions o) : opt(o), rng{o.seed} {
    if (opt.max_in_flight < 1) throw std::invalid_argument("max_in_flight must be >= 1");
    global_init();
    multi = curl_multi_init();
    if (!multi) throw std::runtime_error("curl_multi_init failed");
    curl_multi_setopt(multi, CURLMOPT_MAXCONNECTS, long(opt.max_in_flight + 8));
    // Event-driven: curl tells which sockets to watch (epoll) and when its timers expire, so a
    // wake-up costs O(sockets that are ready), not O(transfers).
    epfd = epoll_create1(EPOLL_CLOEXEC);
    if (epfd < 0) throw std::runtime_error("epoll_create1 failed");
    curl_multi_setopt(multi, CURLMOPT_SOCKETFUNCTION, &Impl::on_socket);
    curl_multi_setopt(multi, CURLMOPT_SOCKETDATA, this);
    curl_multi_setopt(multi, CURLMOPT_TIMERFUNCTION, &Impl::on_timer);
    curl_multi_setopt(multi, CURLMOPT_TIMERDATA, this);
  }

  ~Impl() {
    for (auto& [id, t] : all) {
      if (t->easy) {
        curl_multi_remove_handle(multi, t->easy);
        curl_easy_cleanup(t->easy);
      }
      curl_slist_free_all(t->headers);
    }
    for (CURL* e : pool) curl_easy_cleanup(e);
    curl_multi_cleanup(multi);
    ::close(epfd);
  }

  int epfd = -1;
  double timer_due = -1;  // when curl wants CURL_SOCKET_TIMEOUT (monotonic seconds), -1: none

  static int on_socket(CURL*, curl_socket_t s, int what, void* userp, void* socketp) {
    auto* self = static_cast<Impl*>(userp);
    if (what == CURL_POLL_REMOVE) {
      epoll_ctl(self->epfd, EPOLL_CTL_DEL, s, nullptr);  // may already be closed: ignored
      curl_multi_assign(self->multi, s, nullptr);
      return 0;
    }
    epoll_event ev{};
    ev.data.fd = s;
    ev.events = ((what & CURL_POLL_IN) ? EPOLLIN : 0u) | ((what & CURL_POLL_OUT) ? EPOLLOUT : 0u);
    const int op = socketp ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
    if (epoll_ctl(self->epfd, op, s, &ev) != 0) {
      const int other = op == EPOLL_CTL_ADD ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
      if (errno == EEXIST || errno == ENOENT) epoll_ctl(self->epfd, other, s, &ev);
    }
    curl_multi_assign(self->multi, s, reinterpret_cast<void*>(1));
    return 0;
  }

  static int on_timer(CURLM*, long timeout_ms, void* userp) {
    auto* self = static_cast<Impl*>(userp);
    self->timer_due = timeout_ms < 0 ? -1 : monotonic_seconds() + double(timeout_ms) * 1e-3;
    return 0;
  }

  // Runs curl's expired timers (new transfers start this way too).
  void run_timers() {
    int still = 0;
    while (timer_due >= 0 && timer_due <= monotonic_seconds()) {
      timer_due = -1;
      curl_multi_socket_action(multi, CURL_SOCKET_TIMEOUT, 0, &still);
    }
  }

  void start(Transfer* t) {
    CURL* e = nullptr;
    if (!pool.empty()) {
      e = pool.back();
      pool.pop_back();
      curl_easy_reset(e);
    } else {
      e = curl_easy_init();
      if (!e) throw std::runtime_error("curl_easy_init failed");
    }
    t->easy = e;
    ++t->res.attempts;
    ++counters.attempts;
    if (t->res.attempts > 1) ++counters.retries;
    const double now = monotonic_seconds();
    if (t->res.attempts == 1) t->res.start_s = now;
    t->res.attempt_start_s = now;
    t->res.first_byte_s = 0;
    t->res.status = 0;
    t->res.body.clear();
    t->res.saw_done = false;
    t->res.events = 0;
    t->status_known = false;
    t->stream_mode = false;
    t->sse_buf.clear();
    t->sse_data.clear();
    t->sse_has_data = false;
    t->event_error.clear();
    t->retry_after_s = -1;
    t->errbuf[0] = 0;
    const HttpRequest& r = t->req;
    curl_easy_setopt(e, CURLOPT_URL, r.url.c_str());
    curl_easy_setopt(e, CURLOPT_PRIVATE, this);  // on_write finds the Impl through it
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_NOPROXY, "localhost,127.0.0.1,::1");
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION, long(CURL_HTTP_VERSION_1_1));
    curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, t->errbuf);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, &Impl::on_write);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, t);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, &Impl::on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, t);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, t->headers);
    if (r.timeout_s > 0)
      curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, long(std::ceil(r.timeout_s * 1e3)));
    if (r.connect_timeout_s > 0)
      curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, long(std::ceil(r.connect_timeout_s * 1e3)));
    if (r.idle_timeout_s > 0) {
      curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L);
      curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, long(std::max(1.0, std::ceil(r.idle_timeout_s))));
    }
    if (r.method == "POST") {
      curl_easy_setopt(e, CURLOPT_POST, 1L);
      curl_easy_setopt(e, CURLOPT_POSTFIELDS, r.body.data());
      curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(r.body.size()));
    } else if (r.method == "GET") {
      curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
    } else {
      curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, r.method.c_str());
    }
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);  // a redirect is an answer, never followed
    if (opt.verbose) {
      curl_easy_setopt(e, CURLOPT_VERBOSE, 1L);
      curl_easy_setopt(e, CURLOPT_DEBUGFUNCTION, &Impl::on_debug);
    }
    easy_to_transfer[e] = t;
    curl_multi_add_handle(multi, e);
    ++n_running;
  }

  std::unordered_map<CURL*, Transfer*> easy_to_transfer;

  void release_easy(Transfer* t) {
    if (!t->easy) return;
    curl_multi_remove_handle(multi, t->easy);
    easy_to_transfer.erase(t->easy);
    pool.push_back(t->easy);
    t->easy = nullptr;
    --n_running;
  }

  // Error messages carry the URL, the attempt and the cause (a body snippet, curl's text): any
  // registered secret in them is written as ***.
  std::string describe(const Transfer* t, const std::string& cause) const {
    return redact(t->req.method + " " + t->req.url + " attempt " + std::to_string(t->res.attempts) +
                  "/" + std::to_string(t->req.max_attempts) + ": " + cause);
  }

  void classify(Transfer* t, CURLcode rc) {
    HttpResult& res = t->res;
    long code = 0;
    curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &code);
    res.status = code;
    res.error = HttpErrorKind::kNone;
    res.error_message.clear();
    const std::string detail = t->errbuf[0] ? std::string(t->errbuf) : curl_easy_strerror(rc);
    if (rc == CURLE_WRITE_ERROR && !t->event_error.empty()) {
      res.error = HttpErrorKind::kInvalid;
      res.error_message = describe(t, "rejected stream event: " + t->event_error);
      return;
    }
    if (rc != CURLE_OK) {
      switch (rc) {
        case CURLE_COULDNT_CONNECT:
        case CURLE_COULDNT_RESOLVE_HOST:
        case CURLE_COULDNT_RESOLVE_PROXY:
          res.error = HttpErrorKind::kConnect;
          break;
        case CURLE_OPERATION_TIMEDOUT:
          res.error = HttpErrorKind::kTimeout;
          break;
        case CURLE_URL_MALFORMAT:
        case CURLE_UNSUPPORTED_PROTOCOL:
        case CURLE_BAD_FUNCTION_ARGUMENT:
          res.error = HttpErrorKind::kRequest;
          break;
        default:
          res.error = HttpErrorKind::kTransport;
          break;
      }
      res.error_message = describe(t, std::string(to_string(res.error)) + " (curl " +
                                          std::to_string(int(rc)) + ": " + detail + ")");
      return;
    }
    auto snippet = [&] {
      std::string b = res.body.substr(0, 200);
      return b.empty() ? std::string() : ": " + b;
    };
    if (code == 429) {
      res.error = HttpErrorKind::kHttp429;
    } else if (code >= 500) {
      res.error = HttpErrorKind::kHttp5xx;
    } else if (code < 200 || code >= 300) {
      res.error = HttpErrorKind::kHttp4xx;
    }
    if (res.error != HttpErrorKind::kNone) {
      res.error_message = describe(t, "HTTP " + std::to_string(code) + snippet());
      return;
    }
    if (t->stream_mode) {
      if (!t->sse_buf.empty()) {  // a last line without newline
        t->sse_buf.push_back('\n');
        parse_sse(t);
      }
      dispatch_event(t);
      if (!t->event_error.empty()) {
        res.error = HttpErrorKind::kInvalid;
        res.error_message = describe(t, "rejected stream event: " + t->event_error);
        return;
      }
      if (t->req.require_done && !res.saw_done) {
        res.error = HttpErrorKind::kTransport;
        res.error_message = describe(
            t, "stream ended before data: [DONE] after " + std::to_string(res.events) + " events");
        return;
      }
    } else if (t->req.sse && !t->status_known) {
      // 2xx with an empty body to a streaming request
      if (t->req.require_done) {
        res.error = HttpErrorKind::kTransport;
        res.error_message = describe(t, "empty stream");
        return;
      }
    }
    if (t->req.validate) {
      std::string why = t->req.validate(res);
      if (!why.empty()) {
        res.error = HttpErrorKind::kInvalid;
        res.error_message = describe(t, "invalid response: " + why);
      }
    }
  }

  void complete(Transfer* t, CURLcode rc) {
    if (t->cancelled) return;
    classify(t, rc);
    release_easy(t);
    HttpResult& res = t->res;
    if (res.ok()) {
      finish(t);
      return;
    }
    res.attempt_errors.push_back(res.error_message);
    res.attempt_causes.push_back(attempt_cause(res));
    if (is_retryable(res.error) && res.attempts < t->req.max_attempts) {
      double delay = t->req.backoff_s * std::pow(2.0, res.attempts - 1);
      delay = std::min(delay, t->req.backoff_max_s) * jitter_factor();
      if (res.error == HttpErrorKind::kHttp429 && t->retry_after_s >= 0)
        delay = std::min(std::max(delay, t->retry_after_s), t->req.backoff_max_s);
      t->due_s = monotonic_seconds() + std::max(0.0, delay);
      delayed.emplace(t->due_s, t);
      return;
    }
    finish(t);
  }

  void finish(Transfer* t) {
    t->done = true;
    t->res.end_s = monotonic_seconds();
    if (t->res.ok())
      ++counters.succeeded;
    else
      ++counters.failed;
    finished.push_back(t);
  }

  void start_ready() {
    const double now = monotonic_seconds();
    while (!delayed.empty() && delayed.begin()->first <= now) {
      queue.push_front(delayed.begin()->second);
      delayed.erase(delayed.begin());
    }
    while (!queue.empty() && n_running < size_t(opt.max_in_flight)) {
      Transfer* t = queue.front();
      queue.pop_front();
      start(t);
    }
  }

  void drain_messages() {
    int left = 0;
    while (CURLMsg* m = curl_multi_info_read(multi, &left)) {
      if (m->msg != CURLMSG_DONE) continue;
      auto it = easy_to_transfer.find(m->easy_handle);
      if (it == easy_to_transfer.end()) continue;
      complete(it->second, m->data.result);
    }
  }

  void deliver() {
    while (!finished.empty()) {
      Transfer* t = finished.front();
      finished.pop_front();
      auto node = all.extract(t->id);
      curl_slist_free_all(t->headers);
      t->headers = nullptr;
      if (t->req.on_done) t->req.on_done(t->res);
    }
  }

  bool is_idle() const { return n_running == 0 && queue.empty() && delayed.empty(); }

  // One turn of the loop: start what may start, run due timers, finish what ended, then wait
  // (epoll) for ready sockets, curl's next timer or the next retry (at most max_wait_ms), and
  // hand the ready sockets to curl.
  void step(int max_wait_ms) {
    start_ready();
    run_timers();
    drain_messages();
    deliver();
    start_ready();
    run_timers();
    if (is_idle()) return;
    const double now = monotonic_seconds();
    double until = double(max_wait_ms) * 1e-3;
    if (timer_due >= 0) until = std::min(until, timer_due - now);
    if (!delayed.empty()) until = std::min(until, delayed.begin()->first - now);
    const int wait = std::max(0, int(std::ceil(until * 1e3)));
    epoll_event evs[256];
    const int n = epoll_wait(epfd, evs, 256, wait);
    int still = 0;
    for (int i = 0; i < n; ++i) {
      int flags = 0;
      if (evs[i].events & EPOLLIN) flags |= CURL_CSELECT_IN;
      if (evs[i].events & EPOLLOUT) flags |= CURL_CSELECT_OUT;
      if (evs[i].events & (EPOLLERR | EPOLLHUP)) flags |= CURL_CSELECT_ERR;
      curl_multi_socket_action(multi, evs[i].data.fd, flags, &still);
    }
    run_timers();
    drain_messages();
    deliver();
  }

  void cancel(Transfer* t) {
    if (t->cancelled || t->done) return;
    t->cancelled = true;
    if (t->easy) release_easy(t);
    queue.erase(std::remove(queue.begin(), queue.end(), t), queue.end());
    for (auto it = delayed.begin(); it != delayed.end(); ++it)
      if (it->second == t) {
        delayed.erase(it);
        break;
      }
    t->res.error = HttpErrorKind::kCancelled;
    t->res.error_message = describe(t, "cancelled");
    finish(t);
  }
};

HttpClient::HttpClient(HttpClientOptions options) : impl_(std::make_unique<Impl>(options)) {}
HttpClient::~HttpClient() = default;

uint64_t HttpClient::submit(HttpRequest request) {
  auto t = std::make_unique<Transfer>();
  t->id = impl_->next_id++;
  t->res.id = t->id;
  t->res.submit_s = monotonic_seconds();
  t->req = std::move(request);
  if (t->req.max_attempts < 1) t->req.max_attempts = 1;
  bool has_type = false, has_auth = false;
  for (const auto& h : t->req.headers) {
    t->headers = curl_slist_append(t->headers, h.c_str());
    if (strncasecmp(h.c_str(), "content-type:", 13) == 0) has_type = true;
    if (strncasecmp(h.c_str(), "authorization:", 14) == 0) has_auth = true;
  }
  if (t->req.method == "POST" && !has_type)
    t->headers = curl_slist_append(t->headers, "Content-Type: application/json");
  t->headers = curl_slist_append(t->headers, "Expect:");
  if (!has_auth && api_key_goes_to(t->req.url))
    t->headers = curl_slist_append(t->headers, ("Authorization: Bearer " + api_key()).c_str());
  if (t->req.sse) t->headers = curl_slist_append(t->headers, "Accept: text/event-stream");
  Transfer* raw = t.get();
  impl_->all.emplace(raw->id, std::move(t));
  impl_->queue.push_back(raw);
  ++impl_->counters.submitted;
  return raw->id;
}

void HttpClient::run(const std::function<void()>& on_tick, double tick_s) {
  double next_tick = monotonic_seconds() + tick_s;
  const int wait_ms = on_tick ? std::max(1, int(tick_s * 1e3)) : 1000;
  while (!impl_->is_idle() || !impl_->finished.empty()) {
    impl_->step(wait_ms);
    if (on_tick && monotonic_seconds() >= next_tick) {
      on_tick();
      next_tick = monotonic_seconds() + tick_s;
    }
  }
  impl_->deliver();
  if (on_tick) on_tick();
}

bool HttpClient::run_for(double seconds) {
  const double end = monotonic_seconds() + seconds;
  while (!impl_->is_idle() || !impl_->finished.empty()) {
    const double left = end - monotonic_seconds();
    if (left <= 0) break;
    impl_->step(std::max(1, int(left * 1e3)));
  }
  impl_->deliver();
  return impl_->is_idle();
}

void HttpClient::cancel(uint64_t id) {
  auto it = impl_->all.find(id);
  if (it != impl_->all.end()) impl_->cancel(it->second.get());
}

void HttpClient::cancel_all() {
  std::vector<Transfer*> live;
  for (auto& [id, t] : impl_->all)
    if (!t->cancelled && !t->done) live.push_back(t.get());
  std::sort(live.begin(), live.end(), [](Transfer* a, Transfer* b) { return a->id < b->id; });
  for (Transfer* t : live) impl_->cancel(t);
}

void HttpClient::cancel_queued() {
  std::vector<Transfer*> waiting(impl_->queue.begin(), impl_->queue.end());
  for (const auto& [due, t] : impl_->delayed) waiting.push_back(t);
  std::sort(waiting.begin(), waiting.end(), [](Transfer* a, Transfer* b) { return a->id < b->id; });
  for (Transfer* t : waiting) impl_->cancel(t);
}

size_t HttpClient::running() const { return impl_->n_running; }
size_t HttpClient::pending() const { return impl_->queue.size() + impl_->delayed.size(); }
HttpCounters HttpClient::counters() const { return impl_->counters; }

HttpResult http_fetch(HttpRequest request, const std::string& waiting_for) {
  HttpClient client(HttpClientOptions{.max_in_flight = 1});
  HttpResult out;
  auto user_done = std::move(request.on_done);
  request.on_done = [&](HttpResult& r) {
    if (user_done) user_done(r);
    out = std::move(r);
  };
  const double timeout_s = request.timeout_s;
  const int attempts = request.max_attempts;
  client.submit(std::move(request));
  const double t0 = monotonic_seconds();
  double next_note = t0 + 5;
  bool interrupted = false;
  const int signals_before = stop_signal_count();
  client.run(
      [&] {
        if (stop_signal_count() > signals_before && !interrupted) {
          interrupted = true;
          client.cancel_all();
        }
        const double now = monotonic_seconds();
        if (waiting_for.empty() || interrupted || now < next_note) return;
        next_note = now + 15;
        std::fprintf(stderr,
                     "dsv4-eval: waiting for %s: no answer after %.0f s (--timeout %g s "
                     "per attempt, %d attempt(s))\n",
                     redact(waiting_for).c_str(), now - t0, timeout_s, attempts);
        std::fflush(stderr);
      },
      0.1);
  if (interrupted && out.error == HttpErrorKind::kCancelled)
    out.error_message = "interrupted by " + stop_signal_name() + ": " + out.error_message;
  return out;
}

}  // namespace dsv4::eval
