from django.urls import path

from supportdesk.consumers import ConversationConsumer

websocket_urlpatterns = [
    path("ws/conversations/<uuid:public_id>/", ConversationConsumer.as_asgi()),
]
