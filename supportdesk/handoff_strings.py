"""The human-handoff strings (issue #29), English and Russian: UI strings staff can edit, registered by
:class:`supportdesk.apps.SupportDeskConfig` (importing this module registers nothing).

``widget_handoff_*`` keys go to the widget with its other strings; ``handoff_*`` keys are the
customer's messages stored in ``handoff`` events; ``inbox_*`` keys label the agent inbox."""

from __future__ import annotations

HANDOFF_STRINGS: dict[str, dict[str, str]] = {
    # The widget's control: usable from any reply (a `plan` or `answer` payload with offer_handoff).
    "widget_handoff_button": {"en": "Talk to a person", "ru": "Связаться с человеком"},
    "widget_handoff_email_label": {
        "en": "Your email, to get the reply there (optional)",
        "ru": "Ваш email, чтобы получить ответ на почту (необязательно)",
    },
    "widget_handoff_email_send": {"en": "Send", "ru": "Отправить"},
    "widget_handoff_email_saved": {"en": "Thank you, we will write to {email}.", "ru": "Спасибо, мы напишем на {email}."},
    "widget_staff_label": {"en": "{name} (support team)", "ru": "{name} (служба поддержки)"},
    # The customer's message when a person is asked for: never a silent switch.
    "handoff_requested_online": {
        "en": "I have asked a person from our support team to join. They usually reply within {minutes} minutes; "
              "you can keep writing here meanwhile.",
        "ru": "Я позвал сотрудника службы поддержки. Обычно он отвечает в течение {minutes} минут; "
              "пока можно продолжать писать здесь.",
    },
    "handoff_requested_offline": {
        "en": "I have asked a person from our support team, but nobody is available right now. Expect a reply "
              "within {hours} hours. Leave your email below if you want it sent there too.",
        "ru": "Я позвал сотрудника службы поддержки, но сейчас никого нет на месте. Ответ придёт в течение "
              "{hours} ч. Оставьте email ниже, если хотите получить его и на почту.",
    },
    "handoff_already_requested": {
        "en": "A person from our support team has already been asked for and will reply here.",
        "ru": "Сотрудник службы поддержки уже вызван и ответит здесь.",
    },
    "handoff_claimed": {"en": "{name} from our support team has joined.", "ru": "К разговору подключился {name} из службы поддержки."},
    "handoff_released": {
        "en": "Your conversation is waiting for the next available person.",
        "ru": "Разговор ждёт следующего свободного сотрудника.",
    },
    "handoff_resolved": {
        "en": "{name} marked this conversation as resolved. Write again any time.",
        "ru": "{name} отметил разговор как решённый. Пишите, если понадобится.",
    },
    "handoff_back_to_bot": {
        "en": "You are talking to the assistant again.",
        "ru": "Вы снова общаетесь с ассистентом.",
    },
    "handoff_after_failures": {
        "en": "I could not help with this, so I have asked a person from our support team.",
        "ru": "Мне не удалось помочь, поэтому я позвал сотрудника службы поддержки.",
    },
    "handoff_error_email": {"en": "Please enter a valid email address.", "ru": "Введите корректный адрес email."},
    "handoff_error_not_waiting": {
        "en": "Nobody has been asked for in this conversation.",
        "ru": "В этом разговоре никого не вызывали.",
    },
    # The agent inbox (staff).
    "inbox_error_taken": {"en": "{name} has already claimed this conversation.", "ru": "Этот разговор уже взял {name}."},
    "inbox_error_not_yours": {
        "en": "Claim the conversation before replying to it.",
        "ru": "Сначала возьмите разговор, потом отвечайте.",
    },
    "inbox_error_state": {"en": "This conversation is {state} now.", "ru": "Этот разговор сейчас в состоянии «{state}»."},
    # The inbox page's labels (the staff member's language: the admin's, from the browser).
    "inbox_title": {"en": "Agent inbox", "ru": "Входящие агентов"},
    "inbox_waiting": {"en": "Waiting for a person", "ru": "Ждут сотрудника"},
    "inbox_mine": {"en": "Mine", "ru": "Мои"},
    "inbox_others": {"en": "With other staff", "ru": "У других сотрудников"},
    "inbox_live": {"en": "Live with the assistant", "ru": "Сейчас с ассистентом"},
    "inbox_none": {"en": "none", "ru": "нет"},
    "inbox_waited": {"en": "waiting {time}", "ru": "ждёт {time}"},
    "inbox_claim": {"en": "Claim", "ru": "Взять"},
    "inbox_takeover": {"en": "Take over", "ru": "Перехватить"},
    "inbox_resolve": {"en": "Resolve", "ru": "Решено"},
    "inbox_hand_back": {"en": "Hand back to the assistant", "ru": "Вернуть ассистенту"},
    "inbox_release": {"en": "Release to the queue", "ru": "Вернуть в очередь"},
    "inbox_reply": {"en": "Reply to the customer", "ru": "Ответ клиенту"},
    "inbox_send": {"en": "Send", "ru": "Отправить"},
    "inbox_connecting": {"en": "connecting…", "ru": "подключение…"},
    "inbox_connected": {"en": "live", "ru": "в реальном времени"},
    "inbox_reconnecting": {"en": "reconnecting…", "ru": "переподключение…"},
    "inbox_customer": {"en": "customer", "ru": "клиент"},
    "inbox_to_staff": {"en": "to staff", "ru": "сотрудникам"},
    "inbox_assistant": {"en": "assistant", "ru": "ассистент"},
    "inbox_plan_record": {"en": "plan record", "ru": "запись плана"},
    "inbox_email_subject": {"en": "A customer is waiting for a person", "ru": "Клиент ждёт ответа сотрудника"},
    "inbox_email_body": {
        "en": "Nobody has the agent inbox open. A customer asked for a person ({reason}):\n\n{text}\n\nOpen: {url}",
        "ru": "Никто не открыл входящие агентов. Клиент попросил человека ({reason}):\n\n{text}\n\nОткрыть: {url}",
    },
}
