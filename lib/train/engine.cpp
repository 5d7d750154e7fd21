// The engine thread: admit waiting requests into free cache slots (prefill, first token), then one
// decoding step for every active sequence, repeat. Only this thread touches the model and the
// cache; clients hand over a Job and wait on its promise. Sampling runs on the model's device,
// vectorised over the batch, with each request's own random stream on the host: a request draws one
// uniform number per token from a generator seeded by its `seed`, and inverse-CDF sampling over
// the (top-k, top-p filtered) distribution turns it into a token, so a seeded request is
// reproducible whatever else is in the batch (up to the arithmetic of batched kernels).
#include "cudaagent/train/engine.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <future>
#include <mutex>
#include <random>
#include <thread>

#include "cudaagent/base/session.h"
#include "cudaagent/train/causal_lm.h"

namespace cudaagent::train {
namespace {

struct Job {
  GenerationRequest request;
  std::promise<Result<Completion>> done;
};

struct ReloadJob {
  std::string checkpoint;
  std::promise<Result<std::uint64_t>> done;
};

struct Sequence {
  std::unique_ptr<Job> job;
  std::int64_t slot = 0;
  Completion completion;
  std::int64_t next_position = 0;  // where the last generated token goes into the cache
  std::int64_t max_new = 0;
  std::mt19937_64 rng;
};

struct Pick {
  TokenId token;
  float logprob;
  std::vector<std::pair<TokenId, float>> top;
};

// One token for each row of `logits` [m, vocab] (float32), by each sequence's sampling options.
std::vector<Pick> sample(const at::Tensor& logits, const std::vector<Sequence*>& rows) {
  const auto m = static_cast<std::int64_t>(rows.size());
  const auto vocab = logits.size(1);
  std::vector<float> temperature(rows.size()), top_p(rows.size()), uniform(rows.size());
  std::vector<std::int64_t> top_k(rows.size());
  std::vector<std::uint8_t> greedy_row(rows.size());
  bool any_sampled = false, any_cut = false;
  int most_top = 0;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const SamplingOptions& s = rows[i]->job->request.sampling;
    const bool greedy = s.temperature <= 0;
    greedy_row[i] = greedy ? 1 : 0;
    temperature[i] = greedy ? 1.0f : static_cast<float>(s.temperature);
    top_p[i] = static_cast<float>(s.top_p);
    top_k[i] = s.top_k > 0 ? std::min<std::int64_t>(s.top_k, vocab) : vocab;
    uniform[i] = greedy ? 0.0f : static_cast<float>(std::generate_canonical<double, 53>(rows[i]->rng));
    any_sampled = any_sampled || !greedy;
    any_cut = any_cut || (!greedy && (top_p[i] < 1.0f || top_k[i] < vocab));
    most_top = std::max(most_top, s.logprobs ? s.top_logprobs : 0);
  }
  const auto logp = at::log_softmax(logits, -1);
  auto chosen = logits.argmax(-1);
  if (any_sampled) {
    const auto temps = at::tensor(temperature, at::kFloat).to(logits.device()).unsqueeze(1);
    const auto u = at::tensor(uniform, at::kFloat).to(logits.device()).unsqueeze(1);
    auto probs = at::softmax(logits / temps, -1);
    at::Tensor order;
    if (any_cut) {
      auto sorted = probs.sort(-1, /*descending=*/true);
      probs = std::get<0>(sorted);
      order = std::get<1>(sorted);
      const auto cumulative = probs.cumsum(-1);
      const auto ranks = at::arange(vocab, logits.options().dtype(at::kLong)).unsqueeze(0);
      const auto p_cut = at::tensor(top_p, at::kFloat).to(logits.device()).unsqueeze(1);
      const auto k_cut = at::tensor(top_k, at::kLong).to(logits.device()).unsqueeze(1);
      // Keep the smallest prefix whose mass reaches top_p (the first token always), within top_k.
      const auto keep = ((cumulative - probs) < p_cut).logical_and(ranks < k_cut);
      probs = probs * keep.to(at::kFloat);
    }
    const auto cumulative = probs.cumsum(-1);
    const auto threshold = u * cumulative.select(1, vocab - 1).unsqueeze(1);
    auto rank = (cumulative <= threshold).sum(-1).clamp_max(vocab - 1);
    if (any_cut) {
      // Never step past the kept tokens (possible when u is within rounding of 1).
      const auto kept = (probs > 0).sum(-1) - 1;
      rank = at::minimum(rank, kept);
      rank = order.gather(1, rank.unsqueeze(1)).squeeze(1);
    }
    const auto greedy_rows = at::tensor(std::vector<std::int64_t>(greedy_row.begin(), greedy_row.end()), at::kLong)
                                 .to(logits.device())
                                 .to(at::kBool);
    chosen = at::where(greedy_rows, chosen, rank);
  }
  const auto chosen_logp = logp.gather(1, chosen.unsqueeze(1)).squeeze(1);
  const auto chosen_host = chosen.to(at::kCPU).contiguous();
  const auto logp_host = chosen_logp.to(at::kCPU).contiguous();
  at::Tensor top_values, top_ids;
  if (most_top > 0) {
    auto top = logp.topk(most_top, -1);
    top_values = std::get<0>(top).to(at::kCPU).contiguous();
    top_ids = std::get<1>(top).to(at::kCPU).contiguous();
  }
  std::vector<Pick> picks;
  picks.reserve(rows.size());
  for (std::int64_t i = 0; i < m; ++i) {
    Pick pick{static_cast<TokenId>(chosen_host[i].item<std::int64_t>()), logp_host[i].item<float>(), {}};
    const SamplingOptions& s = rows[static_cast<std::size_t>(i)]->job->request.sampling;
    const int wanted = s.logprobs ? s.top_logprobs : 0;
    for (int k = 0; k < wanted; ++k) {
      pick.top.emplace_back(static_cast<TokenId>(top_ids[i][k].item<std::int64_t>()), top_values[i][k].item<float>());
    }
    picks.push_back(std::move(pick));
  }
  return picks;
}

bool same_architecture(const ModelConfig& a, const ModelConfig& b) {
  return a.model_type == b.model_type && a.vocab_size == b.vocab_size && a.hidden_size == b.hidden_size &&
         a.num_hidden_layers == b.num_hidden_layers && a.num_attention_heads == b.num_attention_heads &&
         a.num_key_value_heads == b.num_key_value_heads && a.head_dim == b.head_dim;
}

}  // namespace

struct Engine::Impl {
  EngineOptions options;
  Tokenizer tokenizer;
  ChatTemplate chat;
  std::unique_ptr<CausalLm> model;
  KvCache cache;

  mutable std::mutex mutex;
  std::condition_variable wake;
  std::deque<std::unique_ptr<Job>> queue;
  std::deque<std::unique_ptr<ReloadJob>> reloads;
  bool stopping = false;
  EngineInfo info;

  // Engine thread only.
  std::vector<Sequence> active;
  std::vector<bool> slot_used;
  std::mt19937_64 seeds{std::random_device{}()};
  std::thread thread;

  Impl(Tokenizer t, ChatTemplate c) : tokenizer(std::move(t)), chat(std::move(c)) {}
  void run();
  void admit(std::unique_ptr<Job> job);
  void step();
  void reload(ReloadJob& job);
  // Appends a picked token; true when the sequence is finished (then its promise is fulfilled).
  bool append(Sequence& sequence, const Pick& pick);
  void fail_active(const std::string& why);
};

void Engine::Impl::run() {
  at::InferenceMode inference;
  while (true) {
    std::vector<std::unique_ptr<Job>> admitted;
    std::unique_ptr<ReloadJob> reload_job;
    {
      std::unique_lock lock(mutex);
      wake.wait(lock, [&] { return stopping || !queue.empty() || !reloads.empty() || !active.empty(); });
      if (stopping) break;
      if (!reloads.empty()) {
        // A reload waits for the batch to drain and keeps new requests out meanwhile.
        if (active.empty()) {
          reload_job = std::move(reloads.front());
          reloads.pop_front();
        }
      } else {
        auto free_slots = std::count(slot_used.begin(), slot_used.end(), false);
        while (free_slots-- > 0 && !queue.empty()) {
          admitted.push_back(std::move(queue.front()));
          queue.pop_front();
        }
      }
    }
    if (reload_job) {
      reload(*reload_job);
      continue;
    }
    for (auto& job : admitted) admit(std::move(job));
    if (!active.empty()) step();
  }
  fail_active("the engine stopped");
  std::lock_guard lock(mutex);
  for (auto& job : queue) job->done.set_value(Status::error("the engine stopped"));
  for (auto& job : reloads) job->done.set_value(Status::error("the engine stopped"));
  queue.clear();
  reloads.clear();
}

void Engine::Impl::admit(std::unique_ptr<Job> job) {
  const auto slot = static_cast<std::int64_t>(std::find(slot_used.begin(), slot_used.end(), false) - slot_used.begin());
  Sequence sequence;
  sequence.slot = slot;
  sequence.completion.prompt_ids = job->request.prompt;
  const auto prompt = static_cast<std::int64_t>(job->request.prompt.size());
  sequence.max_new = cache.capacity - prompt;
  if (job->request.sampling.max_tokens) sequence.max_new = std::min(sequence.max_new, *job->request.sampling.max_tokens);
  sequence.rng.seed(job->request.sampling.seed.value_or(seeds()));
  sequence.next_position = prompt;
  sequence.job = std::move(job);
  try {
    const std::vector<std::int64_t> ids(sequence.job->request.prompt.begin(), sequence.job->request.prompt.end());
    const auto hidden = model->prefill(at::tensor(ids, at::kLong), cache, slot);
    Sequence* row = &sequence;
    const auto picks = sample(model->logits(hidden.unsqueeze(0)), {row});
    {
      std::lock_guard lock(mutex);
      sequence.completion.weights_version = info.weights_version;
    }
    slot_used[static_cast<std::size_t>(slot)] = true;
    if (!append(sequence, picks[0])) {
      active.push_back(std::move(sequence));
    } else {
      slot_used[static_cast<std::size_t>(slot)] = false;
    }
  } catch (const std::exception& error) {
    slot_used[static_cast<std::size_t>(slot)] = false;
    sequence.job->done.set_value(Status::error(std::string("prefill failed: ") + error.what()));
  }
}

bool Engine::Impl::append(Sequence& sequence, const Pick& pick) {
  Completion& c = sequence.completion;
  c.ids.push_back(pick.token);
  c.logprobs.push_back(pick.logprob);
  c.top_logprobs.push_back(pick.top);
  const SamplingOptions& s = sequence.job->request.sampling;
  const auto is_in = [&](const std::vector<TokenId>& list) {
    return std::find(list.begin(), list.end(), pick.token) != list.end();
  };
  if ((!s.ignore_eos && is_in(info.eos_token_ids)) || is_in(s.stop_token_ids)) {
    c.finish_reason = "stop";
  } else if (static_cast<std::int64_t>(c.ids.size()) >= sequence.max_new) {
    c.finish_reason = "length";
  } else {
    return false;
  }
  sequence.job->done.set_value(std::move(c));
  return true;
}

void Engine::Impl::step() {
  std::int64_t rows = 0;
  for (const Sequence& s : active) rows = std::max(rows, s.slot + 1);
  std::vector<std::int64_t> tokens(static_cast<std::size_t>(rows), 0), positions(static_cast<std::size_t>(rows), 0);
  std::vector<std::int64_t> slots;
  std::vector<Sequence*> order;
  for (Sequence& s : active) {
    tokens[static_cast<std::size_t>(s.slot)] = s.completion.ids.back();
    positions[static_cast<std::size_t>(s.slot)] = s.next_position;
    slots.push_back(s.slot);
    order.push_back(&s);
  }
  try {
    const auto hidden = model->decode(at::tensor(tokens, at::kLong), at::tensor(positions, at::kLong), cache);
    const auto index = at::tensor(slots, at::kLong).to(hidden.device());
    const auto picks = sample(model->logits(hidden.index_select(0, index)), order);
    std::vector<Sequence> still;
    for (std::size_t i = 0; i < order.size(); ++i) {
      Sequence& s = *order[i];
      ++s.next_position;
      if (append(s, picks[i])) slot_used[static_cast<std::size_t>(s.slot)] = false;
      else still.push_back(std::move(s));
    }
    active = std::move(still);
  } catch (const std::exception& error) {
    fail_active(std::string("decoding failed: ") + error.what());
  }
}

void Engine::Impl::fail_active(const std::string& why) {
  for (Sequence& s : active) {
    s.job->done.set_value(Status::error(why));
    slot_used[static_cast<std::size_t>(s.slot)] = false;
  }
  active.clear();
}

void Engine::Impl::reload(ReloadJob& job) {
  std::string path;
  {
    std::lock_guard lock(mutex);
    path = job.checkpoint.empty() ? info.checkpoint : job.checkpoint;
  }
  ModelOptions model_options;
  model_options.device = options.device;
  model_options.dtype = options.dtype;
  auto loaded = CausalLm::load(path, model_options);
  if (!loaded) {
    job.done.set_value(loaded.status());
    return;
  }
  if (!same_architecture(loaded.value()->config(), model->config()) || loaded.value()->dtype() != model->dtype()) {
    job.done.set_value(Status::error(cudaagent::quoted(path) + " has another architecture or dtype than the served model"));
    return;
  }
  if (auto t = Tokenizer::load(path); t.is_ok() && t.value().sha256() != tokenizer.sha256()) {
    job.done.set_value(Status::error(cudaagent::quoted(path) + " has another tokenizer.json than the served model"));
    return;
  }
  model = std::move(loaded).value();
  std::uint64_t version = 0;
  {
    std::lock_guard lock(mutex);
    info.checkpoint = path;
    version = ++info.weights_version;
  }
  job.done.set_value(version);
}

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

void Engine::stop() {
  {
    std::lock_guard lock(impl_->mutex);
    impl_->stopping = true;
  }
  impl_->wake.notify_all();
  if (impl_->thread.joinable()) impl_->thread.join();
}

Engine::~Engine() { stop(); }

Result<std::unique_ptr<Engine>> Engine::start(const EngineOptions& options) {
  const std::string tokenizer_dir = options.tokenizer.empty() ? options.checkpoint : options.tokenizer;
  auto tokenizer = Tokenizer::load(tokenizer_dir);
  if (!tokenizer) return tokenizer.status();
  auto chat = ChatTemplate::load(tokenizer_dir, options.chat_format);
  if (!chat) return chat.status();
  ModelOptions model_options;
  model_options.device = options.device;
  model_options.dtype = options.dtype;
  auto model = CausalLm::load(options.checkpoint, model_options);
  if (!model) return model.status();
  if (options.max_batch < 1) return Status::error("the batch must hold at least one sequence");
  auto impl = std::make_unique<Impl>(std::move(tokenizer).value(), std::move(chat).value());
  impl->options = options;
  impl->model = std::move(model).value();
  const ModelConfig& config = impl->model->config();
  const std::int64_t length =
      options.max_model_len > 0 ? options.max_model_len : std::min<std::int64_t>(config.max_position_embeddings, 32768);
  try {
    impl->cache = impl->model->make_cache(options.max_batch, length);
  } catch (const std::exception& error) {
    return Status::error(std::string("cannot allocate the key/value cache: ") + error.what());
  }
  impl->slot_used.assign(static_cast<std::size_t>(options.max_batch), false);
  impl->info.checkpoint = options.checkpoint;
  impl->info.weights_version = 1;
  impl->info.max_model_len = length;
  impl->info.max_batch = options.max_batch;
  impl->info.device = options.device;
  const auto dtype = impl->model->dtype();
  impl->info.dtype = dtype == at::kBFloat16 ? "bfloat16" : dtype == at::kHalf ? "float16" : "float32";
  impl->info.eos_token_ids = load_eos_token_ids(options.checkpoint, config, impl->tokenizer);
  if (tokenizer_dir != options.checkpoint) {
    const auto more = load_eos_token_ids(tokenizer_dir, config, impl->tokenizer);
    auto& ids = impl->info.eos_token_ids;
    ids.insert(ids.end(), more.begin(), more.end());
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  }
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] { raw->run(); });
  return std::unique_ptr<Engine>(new Engine(std::move(impl)));
}

Result<Completion> Engine::generate(GenerationRequest request) {
  const auto& prompt = request.prompt;
  const std::int64_t vocab = impl_->model->config().vocab_size;
  if (prompt.empty()) return Status::error("the prompt is empty");
  if (static_cast<std::int64_t>(prompt.size()) >= impl_->cache.capacity) {
    return Status::error("the prompt has " + std::to_string(prompt.size()) + " tokens; the context holds " +
                         std::to_string(impl_->cache.capacity) + " (prompt and completion)");
  }
  for (const TokenId id : prompt) {
    if (id < 0 || id >= vocab) return Status::error("token id " + std::to_string(id) + " is outside the vocabulary");
  }
  auto job = std::make_unique<Job>();
  job->request = std::move(request);
  auto done = job->done.get_future();
  {
    std::lock_guard lock(impl_->mutex);
    if (impl_->stopping) return Status::error("the engine stopped");
    impl_->queue.push_back(std::move(job));
  }
  impl_->wake.notify_all();
  return done.get();
}

Result<std::uint64_t> Engine::reload(const std::string& checkpoint) {
  auto job = std::make_unique<ReloadJob>();
  job->checkpoint = checkpoint;
  auto done = job->done.get_future();
  {
    std::lock_guard lock(impl_->mutex);
    if (impl_->stopping) return Status::error("the engine stopped");
    impl_->reloads.push_back(std::move(job));
  }
  impl_->wake.notify_all();
  return done.get();
}

EngineInfo Engine::info() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->info;
}

const Tokenizer& Engine::tokenizer() const { return impl_->tokenizer; }
const ChatTemplate& Engine::chat_template() const { return impl_->chat; }

}  // namespace cudaagent::train
